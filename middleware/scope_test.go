package middleware

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
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

// chi: an endpoint "/files/*" counts apart from "/files"; a group mounted
// at "/g" still counts as one, whatever its routes.
func TestScopeChiWildcards(t *testing.T) {
	clock := newFakeClock()
	lim := newCounter(clock, 1, time.Minute)
	mw := mustNew(t, lim, WithKeyFunc(headerKey), withClock(clock.Now))
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
		{"/files/x/y", 200}, // its own budget
		{"/files/z", 429},   // the same as /files/x/y
		{"/g/a", 200},
		{"/g/b/c", 429}, // one group, one budget
		{"/g/", 429},
	}
	for _, s := range steps {
		if rec := get(r, s.path, "c1"); rec.Code != s.want {
			t.Errorf("%s: %d, want %d", s.path, rec.Code, s.want)
		}
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
