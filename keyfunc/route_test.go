package keyfunc

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

func TestRouteChi(t *testing.T) {
	var got []string
	capture := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k, err := Route(r)
			if err != nil {
				t.Errorf("Route: %v", err)
			}
			got = append(got, k)
			next.ServeHTTP(w, r)
		})
	}
	ok := func(http.ResponseWriter, *http.Request) {}
	r := chi.NewRouter()
	r.Use(capture) // runs before routing: no pattern yet
	r.With(capture).Get("/users/{id}", ok)
	r.Route("/api", func(r chi.Router) {
		r.With(capture).Get("/items/{id}", ok)
	})

	tests := []struct {
		path string
		want []string
	}{
		{"/users/42", []string{"path:/users/42", "route:/users/{id}"}},
		{"/api/items/7", []string{"path:/api/items/7", "route:/api/items/{id}"}},
		{"/nowhere", []string{"path:/nowhere"}},
	}
	for _, tt := range tests {
		got = nil
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, tt.path, nil))
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("%s: keys %q, want %q", tt.path, got, tt.want)
		}
	}
}

func TestRouteServeMux(t *testing.T) {
	var got string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /items/{id}", func(_ http.ResponseWriter, r *http.Request) { got, _ = Route(r) })
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/items/9", nil))
	if want := "route:GET /items/{id}"; got != want {
		t.Errorf("Route() = %q, want %q", got, want)
	}
}

func TestRoutePath(t *testing.T) {
	long := "/" + strings.Repeat("a", maxPatternLen)
	tests := []struct {
		path string
		want string
	}{
		{"/a/b", "path:/a/b"},
		{"/a%20b", "path:/a b"},
		{long, "path:#" + HashAPIKey(long)},
		{"/a|b", "path:#" + HashAPIKey("/a|b")},
		{"/a%25b", "path:#" + HashAPIKey("/a%b")},
		{"/a%23b", "path:#" + HashAPIKey("/a#b")},
		{"/caf%C3%A9", "path:#" + HashAPIKey("/café")},
	}
	for _, tt := range tests {
		got, err := Route(httptest.NewRequest(http.MethodGet, tt.path, nil))
		if err != nil || got != tt.want {
			t.Errorf("Route(%s) = %q, %v; want %q", tt.path, got, err, tt.want)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.URL = nil
	if got, err := Route(r); err != nil || got != "path:/" {
		t.Errorf("Route(nil URL) = %q, %v; want path:/", got, err)
	}
}

func TestMethod(t *testing.T) {
	tests := []struct {
		method string
		want   string
	}{
		{"", "method:GET"},
		{"GET", "method:GET"},
		{"HEAD", "method:HEAD"},
		{"POST", "method:POST"},
		{"PUT", "method:PUT"},
		{"PATCH", "method:PATCH"},
		{"DELETE", "method:DELETE"},
		{"OPTIONS", "method:OPTIONS"},
		{"PURGE", "method:PURGE"},
		{"BAD|X", "method:#" + HashAPIKey("BAD|X")},
		{strings.Repeat("M", 33), "method:#" + HashAPIKey(strings.Repeat("M", 33))},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Method = tt.method
		if got, err := Method(r); err != nil || got != tt.want {
			t.Errorf("Method(%q) = %q, %v; want %q", tt.method, got, err, tt.want)
		}
	}
}
