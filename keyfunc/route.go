package keyfunc

import (
	"net/http"

	"github.com/redlimit/redlimit/internal/keytext"
)

// Bounds on the parts of a request that Route and Method key by.
const (
	maxPatternLen = 256
	maxMethodLen  = 32
)

// Route keys a request by the route it matched: "route:" followed by the
// pattern in r.Pattern, which http.ServeMux fills ("route:GET /users/{id}")
// and so does chi from v5.5 on ("route:/users/{id}").
//
// Without a pattern it falls back to the URL path, in a namespace of its own
// ("path:/users/42") so that a client cannot request a literal path that
// lands in a pattern's bucket. Paths are as many as clients care to
// invent, so use Route where the pattern is known: on chi, inside the
// routed group (r.With(mw).Get(...) or r.Route(...)) rather than in a
// top-level r.Use, which runs before routing. Patterns and paths longer
// than 256 bytes, or holding bytes outside printable ASCII, or '|', '%'
// or '#', are hashed.
//
// Route never fails; it has the KeyFunc shape so it can be passed to
// [Join] and [FirstOf] as it is.
func Route(r *http.Request) (string, error) {
	if r.Pattern != "" {
		return keytext.Namespaced("route:", r.Pattern, maxPatternLen, isPatternByte), nil
	}
	path := "/"
	if r.URL != nil && r.URL.Path != "" {
		path = r.URL.Path
	}
	return keytext.Namespaced("path:", path, maxPatternLen, isPatternByte), nil
}

// Method keys a request by its HTTP method: "method:GET". An empty method
// means GET, as in net/http. Methods are tokens a client may invent; one
// longer than 32 bytes or outside letters, digits, '-', '_' and '.' is
// hashed. Method never fails.
func Method(r *http.Request) (string, error) {
	// The common methods return constants: no allocation.
	switch r.Method {
	case "", http.MethodGet:
		return "method:GET", nil
	case http.MethodHead:
		return "method:HEAD", nil
	case http.MethodPost:
		return "method:POST", nil
	case http.MethodPut:
		return "method:PUT", nil
	case http.MethodPatch:
		return "method:PATCH", nil
	case http.MethodDelete:
		return "method:DELETE", nil
	case http.MethodOptions:
		return "method:OPTIONS", nil
	}
	return keytext.Namespaced("method:", r.Method, maxMethodLen, isMethodByte), nil
}
