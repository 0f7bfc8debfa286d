package chiroute

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
)

// TestPattern reads the pattern where a middleware sees it: a route's own
// middleware (r.With), a mounted group's (r.Use inside r.Route), and a
// handler chi never routed.
func TestPattern(t *testing.T) {
	var got string
	capture := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = Pattern(r)
			next.ServeHTTP(w, r)
		})
	}
	ok := func(http.ResponseWriter, *http.Request) {}
	r := chi.NewRouter()
	r.With(capture).Get("/files", ok)
	r.With(capture).Get("/files/*", ok)
	r.With(capture).Get("/users/{id}", ok)
	r.Route("/g", func(r chi.Router) {
		r.Use(capture)
		r.Get("/", ok)
		r.Get("/a/{id}", ok)
	})
	tests := []struct{ path, want string }{
		{"/files", "/files"},
		{"/files/x/y", "/files/*"}, // a route's own wildcard is kept
		{"/files/", "/files"},      // its wildcard is empty
		{"/users/7", "/users/{id}"},
		{"/g", "/g"},
		{"/g/", "/g"},
		{"/g/a/1", "/g"}, // the group's middleware: one pattern for all
	}
	for _, tt := range tests {
		got = "unset"
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, tt.path, nil))
		if got != tt.want {
			t.Errorf("%s: Pattern = %q, want %q", tt.path, got, tt.want)
		}
	}

	req := httptest.NewRequest(http.MethodGet, "/x", nil)
	req.Pattern = "GET /x"
	if p := Pattern(req); p != "GET /x" {
		t.Errorf("without chi: Pattern = %q, want r.Pattern", p)
	}
}
