package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// served is the file every serving test builds, on the memory store
// unless a test adds a redis section.
const served = `trusted_proxies: [10.0.0.0/8]
skip:
  networks: [198.51.100.0/24]
policies:
  items:
    algorithm: fixed_window
    limits: [{rate: 3, period: 1m}]
    key: ip
  export:
    algorithm: token_bucket
    limits: [{rate: 20, period: 1m, burst: 10}]
    key: ip
    cost: 5
  reports:
    algorithm: sliding_window_log
    limits: [{rate: 2, period: 1m}]
    key: {kind: api_key, header: X-API-Key, known_keys: customers}
  me:
    algorithm: leaky_bucket
    limits: [{rate: 1, period: 1m, burst: 2}]
    key: {kind: func, name: user}
  plan:
    algorithm: fixed_window
    limits: [{rate: 2, period: 1m}]
    key: {kind: api_key, known_keys: customers}
    plan_resolver: by_key
    plans:
      pro:
        limits: [{rate: 6, period: 1m}]
  quiet:
    algorithm: fixed_window
    limits: [{rate: 1, period: 1m}]
    key: ip
    shadow: true
routes:
  - {method: GET, path: /items, policy: items}
  - {method: GET, path: "/items/{id}", policy: items}
  - {method: POST, path: /export, policy: export}
  - {method: GET, path: /reports, policy: reports}
  - {method: GET, path: /me, policy: me}
  - {method: GET, path: /plan, policy: plan}
  - {method: GET, path: /quiet, policy: quiet}
`

// handlers answers every route of served with 200.
func handlers(c *Config) map[string]http.Handler {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	hs := map[string]http.Handler{}
	for _, r := range c.Routes {
		hs[r.ID()] = ok
	}
	return hs
}

// buildOpts registers what served names.
func buildOpts(logger *slog.Logger, extra ...Option) []Option {
	pro := keyfunc.HashAPIKey("pro-key")
	return append([]Option{
		WithLogger(logger),
		WithKnownKeys("customers", func(raw string) bool { return raw == "free-key" || raw == "pro-key" }),
		WithKeyFunc("user", func(r *http.Request) (string, error) {
			if u := r.Header.Get("X-User"); u != "" {
				return "user:" + u, nil
			}
			return "", keyfunc.ErrNoToken
		}),
		WithPlanResolver("by_key", func(_ *http.Request, key string) string {
			if key == "key:"+pro {
				return "pro"
			}
			return ""
		}),
	}, extra...)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// mustParse parses file, named served.yaml.
func mustParse(t *testing.T, file string) *Config {
	t.Helper()
	c, err := Parse([]byte(file), "served.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mustBuild builds c with opts; the Runtime is closed when the test ends.
func mustBuild(t *testing.T, c *Config, opts ...Option) *Runtime {
	t.Helper()
	rt, err := c.Build(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(closeCtx()) })
	return rt
}

// mount parses file, builds it with opts and mounts it on a chi router.
func mount(t *testing.T, file string, opts ...Option) (*Runtime, http.Handler) {
	t.Helper()
	c := mustParse(t, file)
	rt := mustBuild(t, c, opts...)
	r := chi.NewRouter()
	if err := rt.Mount(r, handlers(c)); err != nil {
		t.Fatal(err)
	}
	return rt, r
}

// send serves one request from addr with headers as name, value pairs.
func send(h http.Handler, method, path, addr string, headers ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = addr
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// codes sends n requests and returns their statuses.
func codes(h http.Handler, n int, method, path, addr string, headers ...string) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = send(h, method, path, addr, headers...).Code
	}
	return out
}

func ints(s ...int) []int { return s }

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestServeMemory(t *testing.T) {
	_, h := mount(t, served, buildOpts(quiet())...)
	const ok, tooMany, unauthorized = 200, 429, 401
	tests := []struct {
		name    string
		method  string
		path    string
		addr    string
		headers []string
		n       int
		want    []int
	}{
		{"fixed window 3/min", "GET", "/items", "192.0.2.1:1", nil, 4, ints(ok, ok, ok, tooMany)},
		{"another route of the same policy counts apart", "GET", "/items/7", "192.0.2.1:1", nil, 4, ints(ok, ok, ok, tooMany)},
		{"another client", "GET", "/items", "192.0.2.2:1", nil, 1, ints(ok)},
		{"behind the trusted proxy, the client is counted", "GET", "/items", "10.0.0.1:1", []string{"X-Forwarded-For", "192.0.2.1"}, 1, ints(tooMany)},
		{"a client spoofing XFF is counted by its address", "GET", "/items", "192.0.2.3:1", []string{"X-Forwarded-For", "192.0.2.50"}, 4, ints(ok, ok, ok, tooMany)},
		{"skip network passes unlimited", "GET", "/items", "198.51.100.9:1", nil, 10, ints(ok, ok, ok, ok, ok, ok, ok, ok, ok, ok)},
		{"skip network behind proxy", "GET", "/items", "10.0.0.1:1", []string{"X-Forwarded-For", "198.51.100.9"}, 5, ints(ok, ok, ok, ok, ok)},
		{"skip spoofed from outside is limited", "GET", "/items", "192.0.2.4:1", []string{"X-Forwarded-For", "198.51.100.9"}, 4, ints(ok, ok, ok, tooMany)},
		{"cost 5 from a bucket of 10", "POST", "/export", "192.0.2.1:1", nil, 3, ints(ok, ok, tooMany)},
		{"known key", "GET", "/reports", "192.0.2.1:1", []string{"X-API-Key", "free-key"}, 3, ints(ok, ok, tooMany)},
		{"unknown keys get 401, then 429 by address", "GET", "/reports", "192.0.2.5:1", []string{"X-API-Key", "made-up"}, 3, ints(unauthorized, unauthorized, tooMany)},
		{"registered key function", "GET", "/me", "192.0.2.1:1", []string{"X-User", "alice"}, 3, ints(ok, ok, tooMany)},
		{"registered key function, another user", "GET", "/me", "192.0.2.1:1", []string{"X-User", "bob"}, 1, ints(ok)},
		{"free plan", "GET", "/plan", "192.0.2.1:1", []string{"X-API-Key", "free-key"}, 3, ints(ok, ok, tooMany)},
		{"pro plan", "GET", "/plan", "192.0.2.1:1", []string{"X-API-Key", "pro-key"}, 7, ints(ok, ok, ok, ok, ok, ok, tooMany)},
		{"shadow policy refuses nothing", "GET", "/quiet", "192.0.2.1:1", nil, 3, ints(ok, ok, ok)},
	}
	for _, tt := range tests {
		if got := codes(h, tt.n, tt.method, tt.path, tt.addr, tt.headers...); !equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	// Headers name the policy; skipped requests carry none.
	rec := send(h, "GET", "/plan", "192.0.2.9:1", "X-API-Key", "pro-key")
	if got := rec.Header().Get("RateLimit-Policy"); got != `"plan";q=6;w=60` {
		t.Errorf("pro plan RateLimit-Policy %q", got)
	}
	if rec := send(h, "GET", "/items", "198.51.100.9:1"); rec.Header().Get("X-RateLimit-Limit") != "" {
		t.Errorf("skipped request has headers %v", rec.Header())
	}
	if rec := send(h, "GET", "/quiet", "192.0.2.1:1"); rec.Header().Get("X-RateLimit-Limit") != "" {
		t.Errorf("shadow policy sent headers %v", rec.Header())
	}
}

func TestBuildErrors(t *testing.T) {
	c := mustParse(t, served)
	logger := quiet()
	tests := []struct {
		name string
		opts []Option
		want string
	}{
		{"no key function", []Option{WithKnownKeys("customers", func(string) bool { return true }),
			WithPlanResolver("by_key", func(*http.Request, string) string { return "" })},
			`served.yaml:21: policies.me.key: name "user": no key function registered`},
		{"no check of keys", []Option{WithKeyFunc("user", keyfunc.IP()),
			WithPlanResolver("by_key", func(*http.Request, string) string { return "" })},
			`served.yaml:25: policies.plan.key: known_keys "customers": no check of API keys registered`},
		{"no plan resolver", []Option{WithKeyFunc("user", keyfunc.IP()), WithKnownKeys("customers", func(string) bool { return true })},
			`served.yaml:26: policies.plan.plan_resolver: "by_key": no plan resolver registered`},
		{"nil key function", []Option{WithKeyFunc("user", nil)}, `WithKeyFunc("user"): nil function`},
		{"nil option", []Option{nil}, "option 1 is nil"},
		{"bad middleware option", append(buildOpts(logger), WithMiddlewareOptions(middleware.WithSkip(nil))), "served.yaml:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, err := c.Build(append([]Option{WithLogger(logger)}, tt.opts...)...)
			if err == nil {
				rt.Close(closeCtx())
				t.Fatal("built")
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q wrapping ErrInvalid", err, tt.want)
			}
		})
	}
}

func TestMountMismatch(t *testing.T) {
	c := mustParse(t, served)
	rt := mustBuild(t, c, buildOpts(quiet())...)
	hs := handlers(c)
	delete(hs, "GET /me")
	hs["GET /mee"] = http.NotFoundHandler()
	r := chi.NewRouter()
	err := rt.Mount(r, hs)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `handler "GET /mee" has no route`) ||
		!strings.Contains(err.Error(), "served.yaml:40: route GET /me has no handler") {
		t.Fatalf("Mount: %v", err)
	}
	if len(r.Routes()) != 0 {
		t.Fatalf("a failed Mount registered %d routes", len(r.Routes()))
	}
	if err := rt.Mount(r, handlers(c)); err != nil {
		t.Fatal(err)
	}
	if err := rt.Mount(r, handlers(c)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("second Mount: %v", err)
	}
}

// logBuffer is a log sink safe for concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// refusingRouter panics on one pattern, as chi does on routes it cannot
// take.
type refusingRouter struct {
	chi.Router
	refuse string
}

func (r refusingRouter) Method(method, pattern string, h http.Handler) {
	if pattern == r.refuse {
		panic("chi: cannot route " + pattern)
	}
	r.Router.Method(method, pattern, h)
}

// A router that refuses a route gets an error from Mount, not a panic.
func TestMountRefused(t *testing.T) {
	c := mustParse(t, served)
	rt := mustBuild(t, c, buildOpts(quiet())...)
	mux := chi.NewRouter()
	err := rt.Mount(refusingRouter{Router: mux, refuse: "/me"}, handlers(c))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "route GET /me: the router refused it: chi: cannot route /me") {
		t.Fatalf("Mount on a refusing router: %v", err)
	}
	// The routes registered before it serve under their policies.
	if got := codes(mux, 4, "GET", "/items", "192.0.2.1:1"); !equal(got, ints(200, 200, 200, 429)) {
		t.Fatalf("a route mounted before the refusal: %v", got)
	}
}

// A Config made in code is checked by Build as far as Parse would be
// needed to keep Mount from failing at a request.
func TestBuildConfigInCode(t *testing.T) {
	c := mustParse(t, served)
	c.Routes = append(c.Routes, Route{Method: "GET", Path: "/ghost", Policy: "ghost"})
	if _, err := c.Build(buildOpts(quiet())...); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `no policy "ghost"`) {
		t.Fatalf("route to a missing policy: %v", err)
	}
	c.Routes = c.Routes[:len(c.Routes)-1]
	c.Policies["items"].Key.Kind = "cookie"
	if _, err := c.Build(buildOpts(quiet())...); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `unknown key kind "cookie"`) {
		t.Fatalf("unknown key kind: %v", err)
	}
	c.Policies["items"].Key.Kind = KeyIP
	// A Key made in code without its prefix has 0, which would put every
	// IPv6 client in one bucket; so do 31 and 129 fail, 32 and 128 build.
	for _, tt := range []struct {
		bits int
		ok   bool
	}{{0, false}, {31, false}, {129, false}, {32, true}, {128, true}} {
		c.Policies["items"].Key.IPv6Prefix = tt.bits
		rt, err := c.Build(buildOpts(quiet())...)
		want := fmt.Sprintf("served.yaml:8: policies.items.key.ipv6_prefix: %d is outside 32..128", tt.bits)
		switch {
		case tt.ok && err != nil:
			t.Errorf("IPv6Prefix %d: %v", tt.bits, err)
		case tt.ok:
			rt.Close(closeCtx())
		case !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want):
			t.Errorf("IPv6Prefix %d: error %v, want %q", tt.bits, err, want)
		}
	}
}
