package operator

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/middleware"
)

// ErrInvalidPolicy is returned by New for a policy it cannot serve.
var ErrInvalidPolicy = errors.New("operator: invalid policy")

// Policy is one limiter, by the name operators know it by, and the route
// patterns a middleware on it is mounted on, as given to the router
// (see middleware.ScopedKey). No Routes means the middleware does not
// scope by route (WithRouteScope(false)): a client has one state.
type Policy struct {
	Name    string
	Limiter algorithms.RateLimiter
	Routes  []string
}

// Option configures New.
type Option func(*handler)

// WithLogger sets where failures of the store are logged (default
// slog.Default()). Lines name the policy and the error, never the client.
func WithLogger(l *slog.Logger) Option {
	return func(h *handler) {
		if l != nil {
			h.logger = l
		}
	}
}

type handler struct {
	policies map[string]Policy
	list     []byte // GET /policies, built once
	logger   *slog.Logger
}

// New returns the operator handler for policies (see the package doc for
// what it serves). Names must be unique, non-empty printable text without
// '/'; each policy needs a limiter; a route may appear once per policy.
func New(policies []Policy, opts ...Option) (http.Handler, error) {
	h := &handler{policies: make(map[string]Policy, len(policies)), logger: slog.Default()}
	for _, o := range opts {
		o(h)
	}
	type listed struct {
		Name   string   `json:"name"`
		Routes []string `json:"routes"`
	}
	list := make([]listed, 0, len(policies))
	for _, p := range policies {
		if err := checkPolicy(p, h.policies); err != nil {
			return nil, err
		}
		p.Routes = slices.Clone(p.Routes)
		h.policies[p.Name] = p
		list = append(list, listed{Name: p.Name, Routes: append([]string{}, p.Routes...)})
	}
	slices.SortFunc(list, func(a, b listed) int { return strings.Compare(a.Name, b.Name) })
	var err error
	if h.list, err = json.Marshal(map[string]any{"policies": list}); err != nil {
		return nil, fmt.Errorf("operator: %w", err)
	}
	return h, nil
}

func checkPolicy(p Policy, seen map[string]Policy) error {
	switch {
	case p.Name == "" || strings.Contains(p.Name, "/") || !printable(p.Name):
		return fmt.Errorf("%w: name %q must be printable text without '/'", ErrInvalidPolicy, p.Name)
	case p.Limiter == nil:
		return fmt.Errorf("%w: %s has no limiter", ErrInvalidPolicy, p.Name)
	}
	if _, dup := seen[p.Name]; dup {
		return fmt.Errorf("%w: %s named twice", ErrInvalidPolicy, p.Name)
	}
	for i, r := range p.Routes {
		if r == "" || slices.Contains(p.Routes[:i], r) {
			return fmt.Errorf("%w: %s: route %q empty or listed twice", ErrInvalidPolicy, p.Name, r)
		}
	}
	return nil
}

// ServeHTTP routes an operator's request.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case path == "" || path == "/policies":
		if r.Method != http.MethodGet {
			methodNotAllowed(w, "GET")
			return
		}
		writeJSON(w, http.StatusOK, h.list)
	case strings.HasPrefix(path, "/policies/"):
		h.servePolicy(w, r, strings.TrimPrefix(path, "/policies/"))
	default:
		notFound.write(w, "No such resource: the operator serves /policies and /policies/{name}.")
	}
}

// servePolicy peeks (GET) or resets (POST, DELETE) one client of the
// named policy.
func (h *handler) servePolicy(w http.ResponseWriter, r *http.Request, name string) {
	peek := r.Method == http.MethodGet
	if !peek && r.Method != http.MethodPost && r.Method != http.MethodDelete {
		methodNotAllowed(w, "GET, POST, DELETE")
		return
	}
	p, ok := h.policies[name]
	if !ok {
		notFound.write(w, "No policy of that name; GET /policies lists them.")
		return
	}
	q := r.URL.Query()
	identity, msg := identityOf(q["identity"])
	if msg != "" {
		badRequest.write(w, msg)
		return
	}
	routes, status, msg := p.routesFor(q["route"], peek)
	if msg != "" {
		problems[status].write(w, msg)
		return
	}
	if peek {
		h.peek(w, r, p, routes[0], identity)
		return
	}
	h.reset(w, r, p, routes, identity)
}

// routesFor returns the routes a request names: the one given, or, for a
// reset without one, all the policy's. A policy without routes has one
// route, "". On failure it returns a status and why.
func (p Policy) routesFor(given []string, peek bool) ([]string, int, string) {
	switch {
	case len(given) > 1:
		return nil, http.StatusBadRequest, "Give at most one route."
	case len(given) == 1 && !slices.Contains(p.Routes, given[0]):
		return nil, http.StatusNotFound, "The policy is not mounted on that route; GET /policies lists its routes."
	case len(given) == 1:
		return given, 0, ""
	case len(p.Routes) == 0:
		return []string{""}, 0, ""
	case peek:
		return nil, http.StatusBadRequest, "Give the route to look at: one of the policy's routes."
	}
	return p.Routes, 0, ""
}

// peekResult is the answer to a peek, in whole seconds and fractions.
type peekResult struct {
	Policy     string  `json:"policy"`
	Route      string  `json:"route"`
	Allowed    bool    `json:"allowed"`
	Limit      int     `json:"limit"`
	Remaining  int     `json:"remaining"`
	ResetAfter float64 `json:"reset_after_seconds"`
	RetryAfter float64 `json:"retry_after_seconds"`
}

func (h *handler) peek(w http.ResponseWriter, r *http.Request, p Policy, route, identity string) {
	res, err := p.Limiter.Peek(r.Context(), middleware.ScopedKey(route, identity))
	if err != nil {
		h.failed(w, p, err, "The limit store could not answer; nothing was read. Retry later.")
		return
	}
	body, err := json.Marshal(peekResult{
		Policy: p.Name, Route: route, Allowed: res.Allowed, Limit: res.Limit, Remaining: res.Remaining,
		ResetAfter: res.ResetAfter.Seconds(), RetryAfter: res.RetryAfter.Seconds(),
	})
	if err != nil {
		h.failed(w, p, err, "The answer could not be written.")
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// reset resets the client on each route; on a failure it goes on with
// the rest, since a reset is safe to repeat, and answers 503.
func (h *handler) reset(w http.ResponseWriter, r *http.Request, p Policy, routes []string, identity string) {
	var failure error
	for _, route := range routes {
		if err := p.Limiter.Reset(r.Context(), middleware.ScopedKey(route, identity)); err != nil && failure == nil {
			failure = err
		}
	}
	if failure != nil {
		h.failed(w, p, failure, "The limit store could not answer; the client may not be reset. Retrying is safe.")
		return
	}
	body, _ := json.Marshal(map[string]any{"policy": p.Name, "reset_routes": routes}) // strings always marshal
	writeJSON(w, http.StatusOK, body)
}

// failed answers a limiter's error: 400 for a key the limiter refuses,
// else 503, logged with the policy's name and never the client's.
func (h *handler) failed(w http.ResponseWriter, p Policy, err error, detail string) {
	if errors.Is(err, algorithms.ErrInvalidKey) {
		badRequest.write(w, "The identity is too long for this route.")
		return
	}
	h.logger.Warn("operator: limit store failed", "policy", p.Name, "err", err)
	unavailable.write(w, detail)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
