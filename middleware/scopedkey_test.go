package middleware

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/redisstore"
)

// ScopedKey names a client's state as the middleware keeps it: resetting
// the identity alone (what docs/operating.md used to show) leaves the
// client at 429; resetting ScopedKey(pattern, identity) lets its next
// request pass at once, on that route only. Memory and Redis, chi and
// ServeMux.
func TestScopedKeyReset(t *testing.T) {
	addr := redistest.Standalone(t)
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	stores := map[string]func(prefix string) algorithms.Store{
		"memory": func(string) algorithms.Store { return must(memstore.New()) },
		"redis":  func(p string) algorithms.Store { return must(redisstore.New(client, redisstore.WithPrefix(p))) },
	}
	long := "/" + strings.Repeat("x", 200) // hashed in the key
	routers := []struct {
		name      string
		pattern   string // what the operator passes to ScopedKey
		path      string // a request it matches
		otherPath string // another route under the same middleware
		mount     func(mw func(http.Handler) http.Handler) http.Handler
	}{
		{"chi route", "/api/{id}", "/api/7", "/other", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.With(mw).Get("/api/{id}", (&okHandler{}).ServeHTTP)
			r.With(mw).Get("/other", (&okHandler{}).ServeHTTP)
			return r
		}},
		{"chi group", "/g", "/g/a", "/other", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.Route("/g", func(r chi.Router) {
				r.Use(mw)
				r.Get("/a", (&okHandler{}).ServeHTTP)
			})
			r.With(mw).Get("/other", (&okHandler{}).ServeHTTP)
			return r
		}},
		{"mux with host", "GET api.example.com/a|b", "/a|b", "/other", func(mw func(http.Handler) http.Handler) http.Handler {
			mux := http.NewServeMux()
			mux.Handle("GET example.com/a|b", mw(&okHandler{}))
			mux.Handle("GET /other", mw(&okHandler{}))
			return mux
		}},
		{"chi long pattern", long, long, "/other", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.With(mw).Get(long, (&okHandler{}).ServeHTTP)
			r.With(mw).Get("/other", (&okHandler{}).ServeHTTP)
			return r
		}},
	}
	ctx := context.Background()
	for storeName, store := range stores {
		for _, rt := range routers {
			t.Run(storeName+"/"+rt.name, func(t *testing.T) {
				lim, err := algorithms.New(store(t.Name()), algorithms.FixedWindow, algorithms.PerMinute(2))
				if err != nil {
					t.Fatal(err)
				}
				h := rt.mount(mustNew(t, lim, WithKeyFunc(headerKey), WithTimeout(5*time.Second)))
				status := func(path string) int {
					rec := get(h, path, "c1")
					rec.Result().Body.Close()
					return rec.Code
				}
				for _, p := range []string{rt.path, rt.path, rt.otherPath, rt.otherPath} {
					if code := status(p); code != http.StatusOK {
						t.Fatalf("%s: %d before the quota is spent", p, code)
					}
				}
				steps := []struct {
					reset string // "" sends a request without a reset
					path  string
					want  int
				}{
					{"", rt.path, http.StatusTooManyRequests},
					{"c1", rt.path, http.StatusTooManyRequests}, // not the key it is counted under
					{ScopedKey(rt.pattern, "c1"), rt.path, http.StatusOK},
					{"", rt.otherPath, http.StatusTooManyRequests}, // another route keeps its count
				}
				for i, s := range steps {
					if s.reset != "" {
						if err := lim.Reset(ctx, s.reset); err != nil {
							t.Fatal(err)
						}
					}
					if code := status(s.path); code != s.want {
						t.Errorf("step %d (reset %q): %s answered %d, want %d", i, s.reset, s.path, code, s.want)
					}
				}
			})
		}
	}
}

func TestScopedKey(t *testing.T) {
	for _, c := range []struct{ pattern, identity, want string }{
		{"", "ip:203.0.113.7", "ip:203.0.113.7"},
		{"/api/me", "sub:alice", "route:/api/me|sub:alice"},
		{"GET api.example.com/api/me", "sub:alice", "route:GET /api/me|sub:alice"},
		{"/a|b%", "k", "route:/a%7Cb%25|k"},
	} {
		if got := ScopedKey(c.pattern, c.identity); got != c.want {
			t.Errorf("ScopedKey(%q, %q) = %q, want %q", c.pattern, c.identity, got, c.want)
		}
	}
}
