package keyfunc

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
)

// trusted are the proxy ranges the tests trust.
var trusted = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("fd00::/8"),
}

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

func xff(lines ...string) map[string][]string { return map[string][]string{"X-Forwarded-For": lines} }
func fwd(lines ...string) map[string][]string { return map[string][]string{"Forwarded": lines} }
