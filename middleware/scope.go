package middleware

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
)

// scoped prefixes key with the route pattern that matched r, if any. The
// pattern comes from the server's code, not the client, but is escaped all
// the same so that the first '|' always ends it, and hashed when long, so
// keys stay short.
func scoped(r *http.Request, key string) string {
	pattern := r.Pattern
	if rc := chi.RouteContext(r.Context()); rc != nil {
		// A group's middleware sees the mount pattern that matched, one of
		// "/a", "/a/" and "/a/*": chi trims the slash, and the wildcard is
		// trimmed here, so the whole group counts as one.
		if p := strings.TrimSuffix(rc.RoutePattern(), "/*"); p != "" {
			pattern = p
		}
	}
	switch {
	case pattern == "":
		return key
	case len(pattern) > maxScopeLen:
		sum := sha256.Sum256([]byte(pattern))
		pattern = "#" + hex.EncodeToString(sum[:16])
	case strings.ContainsAny(pattern, "%|"):
		pattern = scopeEscaper.Replace(pattern)
	}
	return "route:" + pattern + "|" + key
}

// maxScopeLen bounds the route pattern kept verbatim in a key.
const maxScopeLen = 128

var scopeEscaper = strings.NewReplacer("%", "%25", "|", "%7C")
