package middleware

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
)

// newLimiter builds a limiter with algorithms.New or fails the test.
func newLimiter(t testing.TB, store algorithms.Store, alg algorithms.Algorithm, limits ...algorithms.Limit) algorithms.Limiter {
	t.Helper()
	l, err := algorithms.New(store, alg, limits...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// from sends a GET for path from the client at addr through h, with extra
// headers as name, value pairs.
func from(h http.Handler, path, addr string, headers ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr = addr
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func TestMemoryStore(t *testing.T) {
	// Every algorithm, through the default key function (the client IP):
	// exactly the quota passes, and a client that waits out Retry-After on
	// the shared fake clock gets in.
	for _, alg := range algorithms.All() {
		for _, limit := range []algorithms.Limit{
			{Rate: 5, Period: 10 * time.Second},
			{Rate: 2, Period: 300 * time.Millisecond},
		} {
			t.Run(fmt.Sprintf("%s %s", alg, limit), func(t *testing.T) {
				clock := newFakeClock()
				store := must(memstore.New(memstore.WithClock(clock.Now)))
				next := &okHandler{}
				h := mustNew(t, newLimiter(t, store, alg, limit), withClock(clock.Now))(next)

				first := from(h, "/", "192.0.2.10:5555")
				wantPolicy := fmt.Sprintf(`"default";q=%d;w=%d`, limit.Rate, ceilSeconds(limit.Period, 1))
				if got := first.Header().Get("RateLimit-Policy"); got != wantPolicy {
					t.Errorf("RateLimit-Policy %q, want %q", got, wantPolicy)
				}
				if got := first.Header().Get("X-RateLimit-Remaining"); got != strconv.Itoa(limit.Rate-1) {
					t.Errorf("remaining after one request %q, want %d", got, limit.Rate-1)
				}
				for range limit.Rate + 3 {
					from(h, "/", "192.0.2.10:5555")
				}
				if next.count() != limit.Rate {
					t.Fatalf("%d passed, want exactly %d", next.count(), limit.Rate)
				}
				rec := from(h, "/", "192.0.2.10:6666") // same client, new port
				checkProblem(t, rec, http.StatusTooManyRequests)
				secs, err := strconv.Atoi(rec.Header().Get("Retry-After"))
				if err != nil || secs < 1 {
					t.Fatalf("Retry-After %q", rec.Header().Get("Retry-After"))
				}
				if rec := from(h, "/", "198.51.100.7:5555"); rec.Code != http.StatusOK {
					t.Errorf("another client got %d", rec.Code)
				}
				clock.Advance(time.Duration(secs) * time.Second)
				if rec := from(h, "/", "192.0.2.10:5555"); rec.Code != http.StatusOK {
					t.Errorf("after waiting Retry-After %ds: %d, want 200", secs, rec.Code)
				}
			})
		}
	}
}

func TestKeyfuncErrors(t *testing.T) {
	badToken := "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJtYWxsb3J5In0.c2lnbmF0dXJlLWZvcmdlZA"
	tests := []struct {
		name       string
		kf         keyfunc.KeyFunc
		headers    []string
		status     int
		challenges []string
	}{
		{"no API key", keyfunc.APIKey("X-API-Key"), nil, http.StatusUnauthorized, []string{"APIKey"}},
		{"API key too long", keyfunc.APIKey("X-API-Key"), []string{"X-API-Key", strings.Repeat("k", 300)},
			http.StatusUnauthorized, []string{"APIKey"}},
		{"no token", bearerSubject, nil, http.StatusUnauthorized, []string{"Bearer"}},
		{"forged token", bearerSubject, []string{"Authorization", badToken},
			http.StatusUnauthorized, []string{`Bearer error="invalid_token"`}},
		{"neither token nor key", keyfunc.FirstOf(bearerSubject, keyfunc.APIKey("X-API-Key")), nil,
			http.StatusUnauthorized, []string{"Bearer", "APIKey"}},
		{"no client address", keyfunc.IP(), nil, http.StatusBadRequest, nil},
		{"misconfigured key function", keyfunc.APIKey(""), nil, http.StatusBadRequest, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := newLogger()
			next := &okHandler{}
			lim := newCounter(newFakeClock(), 10, time.Minute)
			h := mustNew(t, lim, WithKeyFunc(tt.kf), WithLogger(logger))(next)
			rec := from(h, "/", "not an address", tt.headers...)
			checkProblem(t, rec, tt.status)
			if got := rec.Header().Values("WWW-Authenticate"); fmt.Sprint(got) != fmt.Sprint(tt.challenges) {
				t.Errorf("WWW-Authenticate %q, want %q", got, tt.challenges)
			}
			if next.count() != 0 || len(lim.seenKeys()) != 0 {
				t.Error("a request without a key reached the limiter or the handler")
			}
			if strings.Contains(rec.Body.String(), "eyJ") || strings.Contains(rec.Body.String(), "kkkk") {
				t.Errorf("body echoes the credential: %s", rec.Body)
			}
		})
	}

	// FirstOf with the client IP last is how a service lets anonymous
	// clients in, under a limit of their own.
	next := &okHandler{}
	h := mustNew(t, newCounter(newFakeClock(), 10, time.Minute),
		WithKeyFunc(keyfunc.FirstOf(keyfunc.APIKey("X-API-Key"), keyfunc.IP())))(next)
	if rec := from(h, "/", "192.0.2.1:1234"); rec.Code != http.StatusOK {
		t.Errorf("anonymous client with the IP fallback: %d", rec.Code)
	}
}

func TestTiers(t *testing.T) {
	clock := newFakeClock()
	store := must(memstore.New(memstore.WithClock(clock.Now)))
	free := newLimiter(t, store, algorithms.FixedWindow, algorithms.PerMinute(2))
	pro := newLimiter(t, store, algorithms.FixedWindow, algorithms.PerMinute(5))
	anonymous := newLimiter(t, store, algorithms.FixedWindow, algorithms.PerMinute(1))
	// The plans know keys by their hash only, as a service should keep them.
	plans := map[string]algorithms.Limiter{
		"key:" + keyfunc.HashAPIKey("free-key-1"): free,
		"key:" + keyfunc.HashAPIKey("pro-key-1"):  pro,
	}
	pick := func(_ *http.Request, key string) algorithms.Limiter {
		return plans[key] // nil for unknown keys and IPs: the default limiter
	}
	next := &okHandler{}
	h := mustNew(t, anonymous, WithKeyFunc(keyfunc.FirstOf(keyfunc.APIKey("X-API-Key"), keyfunc.IP())), WithLimiterFunc(pick))(next)

	for _, tt := range []struct {
		name, key string
		want      int
		limit     string
	}{
		{"free", "free-key-1", 2, "2"},
		{"pro", "pro-key-1", 5, "5"},
		{"unknown key", "who-knows", 1, "1"},
		{"anonymous", "", 1, "1"},
	} {
		passed := 0
		var headers []string
		if tt.key != "" {
			headers = []string{"X-API-Key", tt.key}
		}
		var last *httptest.ResponseRecorder
		for range 10 {
			last = from(h, "/", "192.0.2.44:1000", headers...)
			if last.Code == http.StatusOK {
				passed++
			}
		}
		if passed != tt.want {
			t.Errorf("%s: %d of 10 passed, want %d", tt.name, passed, tt.want)
		}
		if got := last.Header().Get("X-RateLimit-Limit"); got != tt.limit {
			t.Errorf("%s: X-RateLimit-Limit %q, want %q", tt.name, got, tt.limit)
		}
	}
}

func TestMounting(t *testing.T) {
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }
	type route struct {
		path  string
		limit int // 0: not limited
	}
	tests := []struct {
		name   string
		build  func(mw2, mw3 func(http.Handler) http.Handler) http.Handler
		routes []route
	}{{
		name: "chi With",
		build: func(mw2, mw3 func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.With(mw2).Get("/a", ok)
			r.With(mw3).Get("/b/{id}", ok)
			r.Get("/free", ok)
			return r
		},
		routes: []route{{"/a", 2}, {"/b/1", 3}, {"/free", 0}},
	}, {
		name: "chi Route and Use",
		build: func(mw2, mw3 func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.Route("/a", func(r chi.Router) {
				r.Use(mw2)
				r.Get("/", ok)
				r.Get("/x", ok) // same limiter and key: shares /a's count
			})
			r.Route("/b", func(r chi.Router) {
				r.Use(mw3)
				r.Get("/", ok)
			})
			r.Get("/free", ok)
			return r
		},
		routes: []route{{"/a/", 2}, {"/b/", 3}, {"/free", 0}},
	}, {
		name: "ServeMux",
		build: func(mw2, mw3 func(http.Handler) http.Handler) http.Handler {
			mux := http.NewServeMux()
			mux.Handle("GET /a", mw2(http.HandlerFunc(ok)))
			mux.Handle("GET /b/{id}", mw3(http.HandlerFunc(ok)))
			mux.HandleFunc("GET /free", ok)
			return mux
		},
		routes: []route{{"/a", 2}, {"/b/7", 3}, {"/free", 0}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			// One store, two limiters: their counts are their own.
			store := must(memstore.New(memstore.WithClock(clock.Now)))
			mw2 := mustNew(t, newLimiter(t, store, algorithms.FixedWindow, algorithms.PerMinute(2)))
			mw3 := mustNew(t, newLimiter(t, store, algorithms.FixedWindow, algorithms.PerMinute(3)))
			h := tt.build(mw2, mw3)
			// Two limiters alike in every way, on the same routes: still
			// each route its own count.
			alike := mustNew(t, newLimiter(t, store, algorithms.FixedWindow, algorithms.PerMinute(5)))
			alikeToo := mustNew(t, newLimiter(t, store, algorithms.FixedWindow, algorithms.PerMinute(5)))
			hAlike := tt.build(alike, alikeToo)
			for _, rt := range tt.routes[:2] {
				for i := range 5 {
					if rec := from(hAlike, rt.path, "192.0.2.9:4000"); rec.Code != http.StatusOK {
						t.Fatalf("alike limiters, %s request %d: %d, want each route to have its own 5", rt.path, i+1, rec.Code)
					}
				}
			}
			// Interleave the routes, so a shared counter would show.
			passed := map[string]int{}
			for range 6 {
				for _, rt := range tt.routes {
					rec := from(h, rt.path, "192.0.2.8:4000")
					switch rec.Code {
					case http.StatusOK:
						passed[rt.path]++
					case http.StatusTooManyRequests:
					default:
						t.Fatalf("%s: status %d", rt.path, rec.Code)
					}
					if limited := rec.Header().Get("X-RateLimit-Limit") != ""; limited != (rt.limit > 0) {
						t.Errorf("%s: rate-limit headers %v, want %v", rt.path, limited, rt.limit > 0)
					}
				}
			}
			for _, rt := range tt.routes {
				want := rt.limit
				if want == 0 {
					want = 6
				}
				if passed[rt.path] != want {
					t.Errorf("%s: %d of 6 passed, want %d", rt.path, passed[rt.path], want)
				}
			}
			if tt.name == "chi Route and Use" {
				if rec := from(h, "/a/x", "192.0.2.8:4000"); rec.Code != http.StatusTooManyRequests {
					t.Errorf("/a/x shares the group's limiter and key, got %d", rec.Code)
				}
			}
		})
	}
}

func TestSharedLimiterKeyedByRoute(t *testing.T) {
	// One limiter object on two routes: each route counts apart by default;
	// without route scope both count together under the same key, unless
	// the key function keys by route itself.
	ok := func(w http.ResponseWriter, _ *http.Request) {}
	for _, tt := range []struct {
		name string
		opts []Option
		want string
	}{
		{"route scope: each route apart", nil, "map[/x:2 /y:2]"},
		{"no route scope: one count for both", []Option{WithRouteScope(false)}, "map[/x:1 /y:1]"},
		{"no route scope, keyed by route", []Option{WithRouteScope(false), WithKeyFunc(keyfunc.Join(keyfunc.Route, keyfunc.IP()))}, "map[/x:2 /y:2]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := must(memstore.New())
			lim := newLimiter(t, store, algorithms.FixedWindow, algorithms.PerMinute(2))
			r := chi.NewRouter()
			r.With(mustNew(t, lim, tt.opts...)).Get("/x", ok)
			r.With(mustNew(t, lim, tt.opts...)).Get("/y", ok)
			passed := map[string]int{}
			for range 4 {
				for _, p := range []string{"/x", "/y"} {
					if from(r, p, "192.0.2.9:1").Code == http.StatusOK {
						passed[p]++
					}
				}
			}
			if fmt.Sprint(passed) != tt.want {
				t.Errorf("passed %v, want %s", passed, tt.want)
			}
		})
	}
}
