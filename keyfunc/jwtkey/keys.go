package jwtkey

import (
	"net/http"

	"github.com/redlimit/redlimit/keyfunc"
)

// namespaced returns ns+s when s is at most max bytes long and every byte
// is safe, and ns+"#"+hash(s) otherwise, the hash being keyfunc's
// (keyfunc.HashAPIKey), so that a hashed subject reads as keyfunc's hashed
// parts do and never equals a subject kept verbatim ('#' is not safe).
func namespaced(ns, s string, max int, safe func(byte) bool) string {
	if len(s) <= max && allSafe(s, safe) {
		return ns + s
	}
	return ns + "#" + keyfunc.HashAPIKey(s)
}

func allSafe(s string, safe func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !safe(s[i]) {
			return false
		}
	}
	return true
}

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
