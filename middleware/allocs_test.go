package middleware

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
)

// headerWriter is a ResponseWriter that keeps only its header map, which a
// test clears between requests, so the map's own growth is not counted.
type headerWriter struct{ h http.Header }

func (w *headerWriter) Header() http.Header         { return w.h }
func (w *headerWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *headerWriter) WriteHeader(int)             {}

func TestAllocs(t *testing.T) {
	// The budget per request with the memory store and the default key:
	// the decision (its context, header slices and the header values'
	// bytes). The key of a client seen lately, scoped to its route or not,
	// is had from the table of recent keys, and denials add nothing: their
	// body is precomputed.
	const budget = 1
	for _, tt := range []struct {
		name    string
		limit   algorithms.Limit
		clients int
		pattern string // the route that matched, counted apart
		opts    []Option
	}{
		{"pass", huge, 1, "", nil},
		{"deny", algorithms.PerHour(1), 1, "", nil},
		{"pass, many clients, observed", huge, 1000, "", []Option{WithObserver(&countingObserver{})}},
		{"pass, route scope", huge, 1000, "GET /items/{id}", nil},
	} {
		lim := newLimiter(t, must(memstore.New()), algorithms.FixedWindow, tt.limit)
		h := mustNew(t, lim, tt.opts...)(trivial)
		reqs := make([]*http.Request, tt.clients)
		w := &headerWriter{h: http.Header{}}
		for i := range reqs {
			reqs[i] = httptest.NewRequest(http.MethodGet, "/", nil)
			reqs[i].RemoteAddr = "10.1." + strconv.Itoa(i>>8) + "." + strconv.Itoa(i&255) + ":40000"
			reqs[i].Pattern = tt.pattern
			h.ServeHTTP(w, reqs[i]) // the store's entry for the key is made once
		}
		i := 0
		allocs := testing.AllocsPerRun(1000, func() {
			clear(w.h)
			h.ServeHTTP(w, reqs[i])
			if i++; i == len(reqs) {
				i = 0
			}
		})
		if allocs > budget {
			t.Errorf("%s: %.1f allocations per request, budget %d", tt.name, allocs, budget)
		}
		t.Logf("%s: %.1f allocations per request", tt.name, allocs)
	}
}

func TestClockReads(t *testing.T) {
	// One reading of the middleware's clock after the decision serves the
	// breaker and X-RateLimit-Reset (and, on the default clock, the
	// observer's end).
	for _, tt := range []struct {
		name  string
		limit algorithms.Limit
		opts  []Option
	}{
		{"pass", huge, nil},
		{"deny", algorithms.PerHour(1), nil},
		{"pass, observed", huge, []Option{WithObserver(&countingObserver{})}},
		{"pass, no breaker", huge, []Option{WithBreakFor(0)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var reads atomic.Int64
			clock := func() time.Time {
				reads.Add(1)
				return time.Now()
			}
			lim := newLimiter(t, must(memstore.New()), algorithms.FixedWindow, tt.limit)
			h := mustNew(t, lim, append(tt.opts, WithClock(clock))...)(trivial)
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			h.ServeHTTP(httptest.NewRecorder(), r)
			reads.Store(0)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Header().Get("X-RateLimit-Reset") == "" {
				t.Fatal("no X-RateLimit-Reset")
			}
			if n := reads.Load(); n != 1 {
				t.Errorf("%d readings of the clock, want 1", n)
			}
		})
	}
}
