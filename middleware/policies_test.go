package middleware

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
)

// A limiter with several limits announces every one in RateLimit-Policy,
// each under its own name, and RateLimit and the 429 body name the one
// that binds.
func TestEveryPolicyAnnounced(t *testing.T) {
	clock := newFakeClock()
	store := must(memstore.New(memstore.WithClock(clock.Now)))
	lim := newLimiter(t, store, algorithms.FixedWindow, algorithms.PerSecond(2), algorithms.PerMinute(3))
	h := mustNew(t, lim, WithPolicyName("search"), withClock(clock.Now))(&okHandler{})
	const policy = `"search-1s";q=2;w=1, "search-60s";q=3;w=60`
	steps := []struct {
		advance   time.Duration
		code      int
		rateLimit string
		violated  string
	}{
		{0, http.StatusOK, `"search-1s";r=1;t=1`, ""},
		{0, http.StatusOK, `"search-1s";r=0;t=1`, ""},
		{0, http.StatusTooManyRequests, `"search-1s";r=0;t=1`, "search-1s"},
		{time.Second, http.StatusOK, `"search-60s";r=0;t=59`, ""},
		{100 * time.Millisecond, http.StatusTooManyRequests, `"search-60s";r=0;t=59`, "search-60s"},
	}
	for i, s := range steps {
		clock.Advance(s.advance)
		rec := from(h, "/", "192.0.2.1:1000")
		if rec.Code != s.code {
			t.Fatalf("request %d: status %d, want %d", i+1, rec.Code, s.code)
		}
		if got := rec.Header().Get("RateLimit-Policy"); got != policy {
			t.Errorf("request %d: RateLimit-Policy %q, want %q", i+1, got, policy)
		}
		if got := rec.Header().Get("RateLimit"); got != s.rateLimit {
			t.Errorf("request %d: RateLimit %q, want %q", i+1, got, s.rateLimit)
		}
		if s.violated != "" {
			p := checkProblem(t, rec, http.StatusTooManyRequests)
			if fmt.Sprint(p.ViolatedPolicies) != "["+s.violated+"]" {
				t.Errorf("request %d: violated-policies %v, want [%s]", i+1, p.ViolatedPolicies, s.violated)
			}
		}
	}
}

// A limiter picked per request announces its own policies; one with a
// single limit keeps the policy name.
func TestPoliciesOfPickedLimiter(t *testing.T) {
	store := must(memstore.New())
	free := newLimiter(t, store, algorithms.TokenBucket, algorithms.PerMinute(6).WithBurst(2))
	pro := newLimiter(t, store, algorithms.TokenBucket, algorithms.PerSecond(10), algorithms.PerHour(1000).WithBurst(100))
	h := mustNew(t, free, WithLimiterFunc(func(r *http.Request, _ string) algorithms.Limiter {
		if r.Header.Get("X-Plan") == "pro" {
			return pro
		}
		return nil
	}))(&okHandler{})
	for _, tt := range []struct {
		plan, want string
	}{
		{"", `"default";q=2;w=20`},
		{"pro", `"default-1s";q=10;w=1, "default-360s";q=100;w=360`},
		{"pro", `"default-1s";q=10;w=1, "default-360s";q=100;w=360`},
	} {
		rec := from(h, "/", "192.0.2.1:1000", "X-Plan", tt.plan)
		if got := rec.Header().Get("RateLimit-Policy"); rec.Code != http.StatusOK || got != tt.want {
			t.Errorf("plan %q: %d, RateLimit-Policy %q, want %q", tt.plan, rec.Code, got, tt.want)
		}
	}
}

// An empty key is refused as a bad key, with or without a route to scope it.
func TestEmptyKeyRefused(t *testing.T) {
	empty := func(*http.Request) (string, error) { return "", nil }
	lim := newLimiter(t, must(memstore.New()), algorithms.FixedWindow, algorithms.PerMinute(5))
	mux := http.NewServeMux()
	mux.Handle("GET /a", mustNew(t, lim, WithKeyFunc(empty))(&okHandler{}))
	bare := mustNew(t, lim, WithKeyFunc(empty))(&okHandler{})
	for name, h := range map[string]http.Handler{"scoped by ServeMux": mux, "unscoped": bare} {
		t.Run(name, func(t *testing.T) {
			checkProblem(t, from(h, "/a", "192.0.2.1:1000"), http.StatusBadRequest)
		})
	}
}

// When the fallback decides, the headers describe the fallback's limits.
func TestFallbackPoliciesAnnounced(t *testing.T) {
	logger, _ := newLogger()
	fallback := newLimiter(t, must(memstore.New()), algorithms.FixedWindow, algorithms.PerSecond(7), algorithms.PerHour(70))
	h := mustNew(t, &flakyLimiter{down: true}, WithFallback(fallback), WithLogger(logger))(&okHandler{})
	rec := from(h, "/", "192.0.2.1:1000")
	want := `"default-1s";q=7;w=1, "default-3600s";q=70;w=3600`
	if got := rec.Header().Get("RateLimit-Policy"); rec.Code != http.StatusOK || got != want {
		t.Fatalf("%d, RateLimit-Policy %q, want %q", rec.Code, got, want)
	}
}

// sliceLimiter cannot be compared or used as a map key.
type sliceLimiter []int

func (sliceLimiter) Allow(context.Context, string, int) (algorithms.Result, error) {
	return algorithms.Result{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: time.Second, Period: time.Second}, nil
}

// A limiter of a type that cannot be compared, picked per request, is
// served like any other: no panic.
func TestUncomparableLimiterPicked(t *testing.T) {
	lim := sliceLimiter{1}
	h := mustNew(t, lim, WithLimiterFunc(func(*http.Request, string) algorithms.Limiter { return lim }))(&okHandler{})
	if rec := from(h, "/", "192.0.2.1:1000"); rec.Code != http.StatusOK || rec.Header().Get("RateLimit-Policy") != `"default";q=3;w=1` {
		t.Fatalf("%d %v", rec.Code, rec.Header())
	}
}
