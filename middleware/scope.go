package middleware

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/redlimit/redlimit/internal/intern"
)

// ScopedKey returns the key the middleware counts identity's requests
// under on the route registered as routePattern, for a limiter's Peek and
// Reset (see the operator package): identity is what the key function
// returns ("ip:203.0.113.7", "key:"+keyfunc.HashAPIKey(raw), "sub:alice"),
// routePattern the pattern as given to the router: chi's ("/api/me"; for
// a middleware a chi group uses, the group's "/g"; for a route ending in
// "/*", the pattern without "/*" unless WithRoutePattern(chiroute.Pattern)
// keeps it) or http.ServeMux's ("GET /api/me", whose host, if any, is left
// out as the middleware does).
// An empty routePattern returns identity itself, the key of a middleware
// with WithRouteScope(false) or mounted where no pattern is known.
func ScopedKey(routePattern, identity string) string {
	return scopeKey(withoutHost(routePattern), identity)
}

// scoped prefixes key with the route pattern that matched r, if any, as
// the config's routePattern reads it.
func (c *config) scoped(r *http.Request, key string) string {
	return scopeKey(withoutHost(c.routePattern(r)), key)
}

// requestPattern is WithRoutePattern's default: r.Pattern, with a
// trailing "*" segment dropped ("/g/*" is "/g", "/*" is "/").
//
// A chi group's middleware runs before the group routes and sees the
// mount's pattern, "/g" for a request of exactly "/g" and "/g/*" for any
// other: without the drop one group would have two counts, and a client
// twice the limit. http.ServeMux patterns name wildcards in braces, so
// the drop only ever merges a literal "*" segment with its parent (the
// stricter side). A ServeMux pattern's host is left out by scoped.
func requestPattern(r *http.Request) string {
	p := r.Pattern
	if !strings.HasSuffix(p, "/*") {
		return p
	}
	p = p[:len(p)-1] // "/g/", "/", "GET /"
	if len(p) > 1 && p[len(p)-2] != ' ' {
		p = p[:len(p)-1]
	}
	return p
}

// scopeKey prefixes key with pattern. The pattern comes from the server's
// code, not the client, but is escaped all the same so that the first '|'
// always ends it, and hashed when long, so keys stay short.
func scopeKey(pattern, key string) string {
	switch {
	case pattern == "":
		return key
	case len(pattern) > maxScopeLen:
		sum := sha256.Sum256([]byte(pattern))
		pattern = "#" + hex.EncodeToString(sum[:16])
	case strings.ContainsAny(pattern, "%|"):
		pattern = scopeEscaper.Replace(pattern)
	}
	// Built on the stack and taken from the table of recent keys: the same
	// client on the same route costs no allocation.
	var buf [intern.MaxLen]byte
	if n := len(scopePrefix) + len(pattern) + 1 + len(key); n <= len(buf) {
		b := append(buf[:0], scopePrefix...)
		b = append(b, pattern...)
		b = append(b, '|')
		return intern.String(append(b, key...))
	}
	return scopePrefix + pattern + "|" + key
}

// scopePrefix starts every scoped key.
const scopePrefix = "route:"

// maxScopeLen bounds the route pattern kept verbatim in a key.
const maxScopeLen = 128

var scopeEscaper = strings.NewReplacer("%", "%25", "|", "%7C")

// withoutHost drops the host from a ServeMux pattern, "[METHOD ][HOST]/PATH".
func withoutHost(pattern string) string {
	method, rest, ok := strings.Cut(pattern, " ")
	if !ok {
		method, rest = "", pattern
	}
	slash := strings.IndexByte(rest, '/')
	if slash <= 0 {
		return pattern // no host
	}
	if method == "" {
		return rest[slash:]
	}
	return method + " " + rest[slash:]
}
