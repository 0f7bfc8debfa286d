package config

import (
	"fmt"
	"net/http"
	"slices"
	"sort"

	"github.com/redlimit/redlimit/operator"
)

// Policies returns the policies in force for the operator package: one
// operator.Policy per policy of the file, by its name, and one per plan,
// named "policy:plan", each with its limiter and the patterns of its
// routes as the middleware counts by them: chi's path ("/api/items") after
// Mount or before any mount, the ServeMux pattern ("GET /api/items") after
// MountMux. The patterns are those of the router given to Mount: mounted
// under a prefix of another router, the middleware counts by the whole
// pattern, which the file does not know. The list is a snapshot: after a
// reload, call Policies again, or serve Operator's handler, which follows.
func (rt *Runtime) Policies() []operator.Policy { return policiesOf(rt.cur.Load()) }

// policiesOf lists g's policies, then plans, in name order.
func policiesOf(g *generation) []operator.Policy {
	names := make([]string, 0, len(g.limiters))
	for name := range g.limiters {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []operator.Policy
	for _, name := range names {
		lims, routes := g.limiters[name], routesOf(g, name)
		out = append(out, operator.Policy{Name: name, Limiter: lims.own, Routes: routes})
		plans := make([]string, 0, len(lims.plans))
		for plan := range lims.plans {
			plans = append(plans, plan)
		}
		sort.Strings(plans)
		for _, plan := range plans {
			out = append(out, operator.Policy{Name: name + ":" + plan, Limiter: lims.plans[plan], Routes: slices.Clone(routes)})
		}
	}
	return out
}

// routesOf returns the patterns of the policy's routes, in the file's
// order, each once (chi's GET and POST of one path count as one route).
func routesOf(g *generation, policy string) []string {
	routes := []string{}
	for _, route := range g.cfg.Routes {
		if route.Policy != policy {
			continue
		}
		p := route.Path
		if g.pattern != nil {
			var err error
			if p, err = g.pattern(route); err != nil {
				continue // never: the mount checked every route
			}
		}
		if !slices.Contains(routes, p) {
			routes = append(routes, p)
		}
	}
	return routes
}

// Operator returns the operator package's handler for the policies in
// force (see Policies), which follows reloads and the mount: after a
// Reload or ReloadFile, its next request sees the new policies, and a
// request runs wholly under one set. Its failures are logged to the
// logger of WithLogger unless opts set another (operator.WithLogger).
// Like operator.New's, the handler authenticates nothing: mount it behind
// your own authentication. A reload whose policies the operator cannot
// serve is refused, and the running set stays.
func (rt *Runtime) Operator(opts ...operator.Option) (http.Handler, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return nil, fmt.Errorf("%w: the runtime is closed", ErrInvalid)
	}
	opts = append([]operator.Option{operator.WithLogger(rt.opts.logger)}, opts...)
	g := rt.cur.Load()
	h, err := operator.New(policiesOf(g), opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: Operator: %w", ErrInvalid, err)
	}
	next := *g
	next.ops = append(slices.Clip(g.ops), h)
	rt.opsOpts = append(rt.opsOpts, opts)
	rt.cur.Store(&next)
	return &operatorHandler{rt: rt, index: len(next.ops) - 1}, nil
}

// operatorHandler serves the operator handler of the generation in force.
type operatorHandler struct {
	rt    *Runtime
	index int
}

// ServeHTTP runs the request under the current policy set.
func (o *operatorHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.rt.cur.Load().ops[o.index].ServeHTTP(w, r)
}

// operators builds g's operator handlers, one per call of Operator, with
// the options each was given. Called with rt.mu held.
func (rt *Runtime) operators(g *generation) error {
	g.ops = make([]http.Handler, len(rt.opsOpts))
	for i, opts := range rt.opsOpts {
		h, err := operator.New(policiesOf(g), opts...)
		if err != nil {
			return fmt.Errorf("%w: the operator handler cannot serve the policies: %w", ErrInvalid, err)
		}
		g.ops[i] = h
	}
	return nil
}
