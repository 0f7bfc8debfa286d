package config

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestMuxPattern(t *testing.T) {
	tests := []struct {
		path, want, err string
	}{
		{"/items", "GET /items", ""},
		{"/items/{id}", "GET /items/{id}", ""},
		{"/users/{user}/keys/{key}", "GET /users/{user}/keys/{key}", ""},
		{"/files/*", "GET /files/{rest...}", ""},
		{"/", "GET /{$}", ""},
		{"/dir/", "GET /dir/{$}", ""},
		{"/items/{id:[0-9]+}", "", "has no ServeMux form"},
		{"/files*", "", "has no ServeMux form"},
		{"/x/{user-id}", "", "has no ServeMux form"},
		{"/x/v{n}", "", "has no ServeMux form"},
		{"/x/n}", "", "has no ServeMux form"},
		{"/x/{n", "", "has no ServeMux form"},
	}
	for _, tt := range tests {
		got, err := muxPattern(Route{Method: "GET", Path: tt.path})
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %q, %v; want an error with %q", tt.path, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.path, got, err, tt.want)
		}
	}
}

// mountMux parses file, builds it with opts and mounts it on a ServeMux.
func mountMux(t *testing.T, file string, opts ...Option) (*Runtime, *http.ServeMux) {
	t.Helper()
	c := mustParse(t, file)
	rt := mustBuild(t, c, opts...)
	mux := http.NewServeMux()
	if err := rt.MountMux(mux, handlers(c)); err != nil {
		t.Fatal(err)
	}
	return rt, mux
}

// On a ServeMux the routes serve under their policies as on chi, each
// route counting apart, and reloads swap the policies.
func TestServeMux(t *testing.T) {
	file := served + "  - {method: GET, path: \"/files/*\", policy: items}\n  - {method: GET, path: /dir/, policy: items}\n"
	rt, mux := mountMux(t, file, buildOpts(quiet())...)
	const ok, tooMany, notFound = 200, 429, 404
	tests := []struct {
		name    string
		method  string
		path    string
		headers []string
		n       int
		want    []int
	}{
		{"fixed window 3/min", "GET", "/items", nil, 4, ints(ok, ok, ok, tooMany)},
		{"a pattern route counts apart", "GET", "/items/7", nil, 4, ints(ok, ok, ok, tooMany)},
		{"and for every value", "GET", "/items/8", nil, 1, ints(tooMany)},
		{"a wildcard route", "GET", "/files/a/b", nil, 4, ints(ok, ok, ok, tooMany)},
		{"an exact directory", "GET", "/dir/", nil, 4, ints(ok, ok, ok, tooMany)},
		{"below the exact directory", "GET", "/dir/x", nil, 1, ints(notFound)},
		{"cost 5 from a bucket of 10", "POST", "/export", nil, 3, ints(ok, ok, tooMany)},
		{"known key", "GET", "/reports", []string{"X-API-Key", "free-key"}, 3, ints(ok, ok, tooMany)},
		{"registered key function", "GET", "/me", []string{"X-User", "alice"}, 3, ints(ok, ok, tooMany)},
		{"pro plan", "GET", "/plan", []string{"X-API-Key", "pro-key"}, 7, ints(ok, ok, ok, ok, ok, ok, tooMany)},
		{"not mounted", "GET", "/nowhere", nil, 1, ints(notFound)},
	}
	for _, tt := range tests {
		if got := codes(mux, tt.n, tt.method, tt.path, "192.0.2.1:1", tt.headers...); !equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	if err := reload(t, rt, edit(t, file, "limits: [{rate: 3, period: 1m}]", "limits: [{rate: 5, period: 1m}]")); err != nil {
		t.Fatal(err)
	}
	if got := codes(mux, 6, "GET", "/items", "192.0.2.2:1"); !equal(got, ints(ok, ok, ok, ok, ok, tooMany)) {
		t.Errorf("after a reload to 5/min: %v", got)
	}
}

// Routes that have no ServeMux form, or clash on one, are refused before
// anything is mounted; a clash with the application's own route is
// reported as chi's are.
func TestMountMuxRefused(t *testing.T) {
	policy := "policies:\n  p:\n    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n    key: ip\nroutes:\n"
	tests := []struct {
		name   string
		routes string
		own    string // a route the application mounted first
		want   string
	}{
		{"a regular expression", "  - {method: GET, path: \"/a/{id:[0-9]+}\", policy: p}\n", "",
			`served.yaml:7: route GET /a/{id:[0-9]+}: "/a/{id:[0-9]+}" has no ServeMux form`},
		{"two routes that clash", "  - {method: GET, path: /ok, policy: p}\n  - {method: GET, path: \"/a/{x}\", policy: p}\n  - {method: GET, path: \"/a/{y}\", policy: p}\n", "",
			"route GET /a/{y}: the router refused it"},
		{"a clash with the application's route", "  - {method: GET, path: /ok, policy: p}\n", "GET /ok",
			"route GET /ok: the router refused it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(policy+tt.routes), "served.yaml")
			if err != nil {
				t.Fatal(err)
			}
			rt, err := c.Build(WithLogger(quiet()))
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close(closeCtx())
			mux := http.NewServeMux()
			if tt.own != "" {
				mux.Handle(tt.own, http.NotFoundHandler())
			}
			err = rt.MountMux(mux, handlers(c))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error\n%v\nlacks %q", err, tt.want)
			}
			if tt.own == "" {
				if got := codes(mux, 1, "GET", "/ok", "192.0.2.1:1"); !equal(got, ints(404)) {
					t.Fatalf("a refused Mount left routes on the mux: %v", got)
				}
			}
		})
	}
	if err := (&Runtime{}).MountMux(nil, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("nil mux: %v", err)
	}
}
