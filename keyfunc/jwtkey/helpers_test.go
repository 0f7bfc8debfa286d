package jwtkey

import (
	"net/http"
	"net/http/httptest"
)

// newRequest builds a GET request from remote with the given header lines,
// each name mapping to its lines in order.
func newRequest(remote string, header map[string][]string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	for name, lines := range header {
		for _, l := range lines {
			r.Header.Add(name, l)
		}
	}
	return r
}
