// Package chiroute reads the route pattern of a request routed by chi, for
// middleware.WithRoutePattern:
//
//	mw, err := middleware.New(limiter, middleware.WithRoutePattern(chiroute.Pattern))
//
// The middleware needs it only where chi's pattern and r.Pattern differ: a
// chi route of its own ending in "/*" ("/files/*") then counts apart from
// its parent ("/files"), as a group's middleware still counts the whole
// group as one. Without it the middleware reads r.Pattern, which chi fills
// from v5.5 on, and counts such a route with its parent. It is the one
// package of the module that imports chi.
package chiroute

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
)

// Pattern returns the pattern of the chi route that matched r, or
// r.Pattern when chi has not routed r (a ServeMux's pattern, or ""). A
// mounted group's middleware runs before the group routes and sees the
// mount's pattern, "/g" or "/g/*" (chi trims "/g/"), with the wildcard
// emptied by chi's mount handler: the wildcard is trimmed so that the
// whole group counts as one. A route's own "/g/*" keeps what it matched
// and counts apart from "/g" (but for a request of exactly "/g/", whose
// wildcard is empty too).
func Pattern(r *http.Request) string {
	rc := chi.RouteContext(r.Context())
	if rc == nil {
		return r.Pattern
	}
	p := rc.RoutePattern()
	if strings.HasSuffix(p, "/*") && rc.URLParam("*") == "" {
		p = strings.TrimSuffix(p, "/*")
	}
	if p == "" {
		return r.Pattern
	}
	return p
}
