package jwtkey

import (
	"net/http"

	"github.com/redlimit/redlimit/keyfunc"
)

// isIdentByte admits what subjects usually hold (UUIDs, numbers, e-mail
// addresses, URLs without query strings) and nothing that could be read
// as a separator or an escape.
func isIdentByte(c byte) bool {
	if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
		return true
	}
	switch c {
	case '-', '.', '_', '~', '@', '+', '=', ':', '/':
		return true
	}
	return false
}

// failing returns a KeyFunc that always fails with err: how constructors
// without an error result report a bad configuration without panicking.
func failing(err error) keyfunc.KeyFunc {
	return func(*http.Request) (string, error) { return "", err }
}
