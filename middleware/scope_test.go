package middleware

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/redlimit/redlimit/middleware/chiroute"
)

func TestWithoutHost(t *testing.T) {
	for in, want := range map[string]string{
		"":                               "",
		"/items":                         "/items",
		"GET /items":                     "GET /items",
		"api.example.com/items":          "/items",
		"GET api.example.com/items/{id}": "GET /items/{id}",
		"POST  api.example.com/":         "POST /",
		"example.com/":                   "/",
		"GET /static/{path...}":          "GET /static/{path...}",
	} {
		if got := withoutHost(in); got != want {
			t.Errorf("withoutHost(%q) = %q, want %q", in, got, want)
		}
	}
}

// chi: a group mounted at "/g" counts as one, whatever its routes, with
// either reading of the pattern; an endpoint "/files/*" counts apart from
// "/files" under chiroute.Pattern, and with it under the default.
func TestScopeChiWildcards(t *testing.T) {
	tests := []struct {
		name  string
		opts  []Option
		files int // the status of /files/x/y after /files
	}{
		{"default", nil, 429},
		{"chiroute", []Option{WithRoutePattern(chiroute.Pattern)}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			lim := newCounter(clock, 1, time.Minute)
			mw := mustNew(t, lim, append([]Option{WithKeyFunc(headerKey), withClock(clock.Now)}, tt.opts...)...)
			ok := func(http.ResponseWriter, *http.Request) {}
			r := chi.NewRouter()
			r.With(mw).Get("/files", ok)
			r.With(mw).Get("/files/*", ok)
			r.Route("/g", func(r chi.Router) {
				r.Use(mw)
				r.Get("/", ok)
				r.Get("/a", ok)
				r.Get("/b/*", ok)
			})
			steps := []struct {
				path string
				want int
			}{
				{"/files", 200},
				{"/files/x/y", tt.files},
				{"/files/z", 429},
				{"/g/a", 200},
				{"/g/b/c", 429}, // one group, one budget
				{"/g/", 429},
				{"/g", 429},
			}
			for _, s := range steps {
				if rec := get(r, s.path, "c1"); rec.Code != s.want {
					t.Errorf("%s: %d, want %d", s.path, rec.Code, s.want)
				}
			}
		})
	}
}

func TestRequestPattern(t *testing.T) {
	for in, want := range map[string]string{
		"":           "",
		"/g":         "/g",
		"/g/*":       "/g",
		"/*":         "/",
		"GET /*":     "GET /",
		"GET /f/{x}": "GET /f/{x}",
		"/a*":        "/a*",
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Pattern = in
		if got := requestPattern(r); got != want {
			t.Errorf("requestPattern(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWithRoutePatternNil(t *testing.T) {
	lim := newCounter(newFakeClock(), 1, time.Minute)
	if _, err := New(lim, WithRoutePattern(nil)); err == nil || !strings.Contains(err.Error(), "WithRoutePattern") {
		t.Fatalf("New(WithRoutePattern(nil)) = %v, want an error naming it", err)
	}
}

// http.ServeMux: one handler under a host pattern and a plain one has one
// budget, not one per Host header.
func TestScopeServeMuxHost(t *testing.T) {
	clock := newFakeClock()
	lim := newCounter(clock, 1, time.Minute)
	h := mustNew(t, lim, WithKeyFunc(headerKey), withClock(clock.Now))(&okHandler{})
	mux := http.NewServeMux()
	mux.Handle("GET /api/items", h)
	mux.Handle("GET api.example.com/api/items", h)
	first := get(mux, "/api/items", "c1")
	req := func(host string) int {
		r, _ := http.NewRequest(http.MethodGet, "http://"+host+"/api/items", nil)
		r.Header.Set("X-Client", "c1")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		return rec.Code
	}
	if first.Code != 200 || req("api.example.com") != 429 || req("other.example") != 429 {
		t.Fatal("the host pattern gave a second budget")
	}
	if keys := lim.seenKeys(); len(keys) != 3 || !strings.HasPrefix(keys[0], "route:GET /api/items|") || keys[1] != keys[0] || keys[2] != keys[0] {
		t.Fatalf("keys %q, want one scope", keys)
	}
}
