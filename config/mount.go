package config

import (
	"fmt"
	"go/token"
	"net/http"
	"sort"
	"strings"

	"github.com/go-chi/chi/v5"
)

// Mount registers each handler on r at its route, "METHOD /pattern" as in
// the file's routes ("GET /api/items"), behind the route's policy. The
// handlers must match the file's routes one for one (a route without a
// handler, or a handler without a route, is an error wrapping ErrInvalid
// and nothing is mounted), so a typo on either side is found at start-up.
// Mount, or MountMux, is called once; routes that no policy limits are
// registered on r directly.
func (rt *Runtime) Mount(r chi.Router, handlers map[string]http.Handler) error {
	if r == nil {
		return fmt.Errorf("%w: Mount: nil router", ErrInvalid)
	}
	on := func(r chi.Router) func(*mounted, string) {
		return func(m *mounted, pattern string) { r.Method(m.route.Method, pattern, m) }
	}
	chiPattern := func(route Route) (string, error) { return route.Path, nil }
	return rt.mount(handlers, chiPattern, on(chi.NewRouter()), on(r))
}

// MountMux is Mount for a net/http ServeMux. The file's chi patterns
// become ServeMux patterns that match the same paths: "{name}" stays, a
// final "/*" becomes "/{rest...}" (r.PathValue("rest")), a final "/"
// becomes "/{$}" (chi matches it exactly). A route whose pattern has no
// ServeMux form (a regular expression such as "{id:[0-9]+}", a wildcard
// within a segment, a name that is not a Go identifier) or that clashes
// with another route is an error wrapping ErrInvalid, and nothing is
// mounted. As everywhere on a ServeMux, a GET route also answers HEAD,
// under the GET route's policy.
func (rt *Runtime) MountMux(mux *http.ServeMux, handlers map[string]http.Handler) error {
	if mux == nil {
		return fmt.Errorf("%w: MountMux: nil ServeMux", ErrInvalid)
	}
	on := func(mux *http.ServeMux) func(*mounted, string) {
		return func(m *mounted, pattern string) { mux.Handle(pattern, m) }
	}
	return rt.mount(handlers, muxPattern, on(http.NewServeMux()), on(mux))
}

// mount checks handlers against the routes and turns each route into the
// router's pattern; registers them all on a trial router of their own, so
// that routes that clash leave the caller's router untouched; then
// publishes the wrapped handlers and registers them with add.
func (rt *Runtime) mount(handlers map[string]http.Handler, pattern func(Route) (string, error), trial, add func(*mounted, string)) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.mounted != nil {
		return fmt.Errorf("%w: Mount called twice", ErrInvalid)
	}
	g := rt.cur.Load()
	problems := matchHandlers(g.cfg, handlers)
	ms := make([]*mounted, len(g.cfg.Routes))
	patterns := make([]string, len(g.cfg.Routes))
	for i, route := range g.cfg.Routes {
		ms[i] = &mounted{rt: rt, index: i, route: route, h: handlers[route.ID()]}
		p, err := pattern(route)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s:%d: route %s: %v", g.cfg.Name, route.at.line, route.ID(), err))
		}
		patterns[i] = p
	}
	if len(problems) == 0 {
		if err := register(ms, patterns, trial); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("%w: Mount: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	// Published before the router can route to them, with the operator's
	// routes in the router's patterns.
	next := *g
	next.pattern = pattern
	if err := rt.operators(&next); err != nil {
		return err
	}
	next.handlers = wrap(&next, ms)
	rt.mounted = ms
	rt.cur.Store(&next)
	if err := register(ms, patterns, add); err != nil {
		return fmt.Errorf("%w: Mount: %w", ErrInvalid, err)
	}
	return nil
}

// matchHandlers lists the differences between handlers and c's routes.
func matchHandlers(c *Config, handlers map[string]http.Handler) []string {
	want := map[string]bool{}
	for _, route := range c.Routes {
		want[route.ID()] = true
	}
	var problems []string
	for id, h := range handlers {
		switch {
		case !want[id]:
			problems = append(problems, fmt.Sprintf("handler %q has no route in %s", id, c.Name))
		case h == nil:
			problems = append(problems, fmt.Sprintf("handler %q is nil", id))
		}
	}
	for _, route := range c.Routes {
		if handlers[route.ID()] == nil {
			problems = append(problems, fmt.Sprintf("%s:%d: route %s has no handler", c.Name, route.at.line, route.ID()))
		}
	}
	return problems
}

// register adds the routes with add. A router panics on a route it
// refuses (one that clashes with another): that is an error, and the
// routes added before it stay.
func register(ms []*mounted, patterns []string, add func(*mounted, string)) (err error) {
	var at *mounted
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("route %s: the router refused it: %v", at.route.ID(), p)
		}
	}()
	for i, m := range ms {
		at = m
		add(m, patterns[i])
	}
	return nil
}

// wrap puts each mounted route's handler behind its policy in g.
func wrap(g *generation, ms []*mounted) []http.Handler {
	byID := map[string]Route{}
	for _, route := range g.cfg.Routes {
		byID[route.ID()] = route
	}
	hs := make([]http.Handler, len(ms))
	for i, m := range ms {
		hs[i] = g.policies[byID[m.route.ID()].Policy](m.h)
	}
	return hs
}

// muxPattern is route as a ServeMux pattern matching the paths that its
// chi pattern matches.
func muxPattern(route Route) (string, error) {
	segs := strings.Split(route.Path, "/")
	last := len(segs) - 1
	for i, seg := range segs {
		switch {
		case i == last && seg == "*":
			segs[i] = "{rest...}"
		case i == last && seg == "" && i > 0:
			segs[i] = "{$}" // chi's "/a/" is exact; the ServeMux's would be a subtree
		case strings.ContainsAny(seg, "*{}"):
			name, open := strings.CutPrefix(seg, "{")
			name, closed := strings.CutSuffix(name, "}")
			if !open || !closed || !token.IsIdentifier(name) {
				return "", fmt.Errorf("%q has no ServeMux form (a regular expression, a wildcard within a segment, or a name that is not a Go identifier): mount it on chi", route.Path)
			}
		}
	}
	return route.Method + " " + strings.Join(segs, "/"), nil
}
