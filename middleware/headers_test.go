package middleware

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/memstore"
)

func TestLimitHeaderPrecomputed(t *testing.T) {
	// X-RateLimit-Limit is the binding limit's quota, from a value made
	// once per policy and shared by every response: a handler that adds
	// to the field in one response must not change it in the next.
	for _, tt := range []struct {
		name   string
		limits []algorithms.Limit
		want   []int // the quota each request's headers state
	}{
		{"one limit", []algorithms.Limit{algorithms.PerMinute(5)}, []int{5, 5, 5}},
		// The limit with less left binds.
		{"two limits, first binds", []algorithms.Limit{algorithms.PerSecond(3), algorithms.PerMinute(100)}, []int{3, 3, 3}},
		{"two limits, second binds", []algorithms.Limit{algorithms.PerSecond(10), algorithms.PerMinute(3)}, []int{3, 3, 3}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lim := newLimiter(t, must(memstore.New()), algorithms.FixedWindow, tt.limits...)
			var n int
			h := mustNew(t, lim)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Add("X-RateLimit-Limit", "outer-"+strconv.Itoa(n))
				n++
				w.WriteHeader(http.StatusNoContent)
			}))
			recs := make([]*httptest.ResponseRecorder, len(tt.want))
			for i := range recs {
				recs[i] = httptest.NewRecorder()
				h.ServeHTTP(recs[i], httptest.NewRequest(http.MethodGet, "/", nil))
				if recs[i].Code != http.StatusNoContent {
					t.Fatalf("request %d: status %d", i, recs[i].Code)
				}
			}
			for i, quota := range tt.want {
				want := []string{strconv.Itoa(quota), "outer-" + strconv.Itoa(i)}
				if got := recs[i].Header()["X-Ratelimit-Limit"]; !slices.Equal(got, want) {
					t.Errorf("response %d: X-RateLimit-Limit %q, want %q", i, got, want)
				}
			}
		})
	}
}

func TestHeaderBytes(t *testing.T) {
	// The exact bytes of every header a response gets, on a clock that
	// stands still: what the hot path's buffer and precomputed values must
	// reproduce. A handler that writes into its header values in place must
	// not change the next response's.
	outer := func(next http.Handler) http.Handler {
		// An outer limiter's fields, set before the middleware runs.
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Ratelimit-Policy"] = []string{`"network";q=1000;w=60`}
			w.Header()["Ratelimit"] = []string{`"network";r=999;t=60`}
			next.ServeHTTP(w, r)
		})
	}
	for _, tt := range []struct {
		name     string
		limiter  func(*storetest.ManualClock) algorithms.Limiter
		opts     []Option
		wrap     func(http.Handler) http.Handler
		requests int         // the last one's headers are checked
		want     http.Header // of the last response
	}{
		{
			name: "one limit", requests: 2,
			want: http.Header{
				"X-Ratelimit-Limit":     {"5"},
				"X-Ratelimit-Remaining": {"3"},
				"X-Ratelimit-Reset":     {"1767323106"},
				"Ratelimit-Policy":      {`"default";q=5;w=60`},
				"Ratelimit":             {`"default";r=3;t=60`},
			},
		},
		{
			name: "two limits, the second binds", requests: 1,
			limiter: func(c *storetest.ManualClock) algorithms.Limiter {
				return mustLimiter(t, c, algorithms.PerSecond(10), algorithms.PerMinute(3))
			},
			want: http.Header{
				"X-Ratelimit-Limit":     {"3"},
				"X-Ratelimit-Remaining": {"2"},
				"X-Ratelimit-Reset":     {"1767323106"},
				"Ratelimit-Policy":      {`"default-1s";q=10;w=1, "default-60s";q=3;w=60`},
				"Ratelimit":             {`"default-60s";r=2;t=60`},
			},
		},
		{
			name: "denied", requests: 6,
			want: http.Header{
				"X-Ratelimit-Limit":     {"5"},
				"X-Ratelimit-Remaining": {"0"},
				"X-Ratelimit-Reset":     {"1767323106"},
				"Ratelimit-Policy":      {`"default";q=5;w=60`},
				"Ratelimit":             {`"default";r=0;t=60`},
				"Retry-After":           {"60"},
				"Cache-Control":         {"no-store"},
				"Content-Type":          {"application/problem+json"},
			},
		},
		{
			name: "reset as a delta, named policy", requests: 1,
			opts: []Option{WithResetMode(ResetDelta), WithPolicyName(`a"b`)},
			want: http.Header{
				"X-Ratelimit-Limit":     {"5"},
				"X-Ratelimit-Remaining": {"4"},
				"X-Ratelimit-Reset":     {"60"},
				"Ratelimit-Policy":      {`"a\"b";q=5;w=60`},
				"Ratelimit":             {`"a\"b";r=4;t=60`},
			},
		},
		{
			name: "a limiter that does not describe its limits", requests: 2,
			limiter: func(*storetest.ManualClock) algorithms.Limiter {
				return allowOnly{mustLimiter(t, nil, algorithms.PerMinute(5))}
			},
			want: http.Header{
				"X-Ratelimit-Limit":     {"5"},
				"X-Ratelimit-Remaining": {"3"},
				"X-Ratelimit-Reset":     {"1767323106"},
				"Ratelimit-Policy":      {`"default";q=5;w=60`},
				"Ratelimit":             {`"default";r=3;t=60`},
			},
		},
		{
			name: "after an outer limiter's fields", requests: 1, wrap: outer,
			want: http.Header{
				"X-Ratelimit-Limit":     {"5"},
				"X-Ratelimit-Remaining": {"4"},
				"X-Ratelimit-Reset":     {"1767323106"},
				"Ratelimit-Policy":      {`"network";q=1000;w=60`, `"default";q=5;w=60`},
				"Ratelimit":             {`"network";r=999;t=60`, `"default";r=4;t=60`},
			},
		},
		{
			name: "legacy headers only", requests: 1, opts: []Option{WithIETFHeaders(false)},
			want: http.Header{
				"X-Ratelimit-Limit":     {"5"},
				"X-Ratelimit-Remaining": {"4"},
				"X-Ratelimit-Reset":     {"1767323106"},
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := storetest.NewManualClock(epoch)
			newLim := tt.limiter
			if newLim == nil {
				newLim = func(c *storetest.ManualClock) algorithms.Limiter {
					return mustLimiter(t, c, algorithms.PerMinute(5))
				}
			}
			h := mustNew(t, newLim(clock), append(tt.opts, WithClock(clock.Now))...)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusNoContent)
				// Legal for a handler: the values are its own. What was
				// sent is the recorder's snapshot, taken above.
				for _, vs := range w.Header() {
					for i := range vs {
						vs[i] = "scribbled"
					}
				}
			}))
			if tt.wrap != nil {
				h = tt.wrap(h)
			}
			var rec *httptest.ResponseRecorder
			for range tt.requests {
				rec = httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			}
			got := rec.Result().Header
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("headers\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// mustLimiter is a fixed-window limiter on the memory store, on clock when
// not nil.
func mustLimiter(t *testing.T, clock *storetest.ManualClock, limits ...algorithms.Limit) algorithms.Limiter {
	t.Helper()
	store := must(memstore.New())
	if clock != nil {
		store = must(memstore.New(memstore.WithClock(clock.Now)))
	}
	return newLimiter(t, store, algorithms.FixedWindow, limits...)
}

// allowOnly hides every method of a limiter but Allow, as a limiter of the
// caller's own making may have.
type allowOnly struct{ l algorithms.Limiter }

func (a allowOnly) Allow(ctx context.Context, key string, cost int) (algorithms.Result, error) {
	return a.l.Allow(ctx, key, cost)
}
