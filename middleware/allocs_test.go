package middleware

import (
	"net/http"
	"net/http/httptest"
	"testing"

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
	// the key string and the decision (context, header slices and the
	// header values' bytes). Denials add nothing: their body is
	// precomputed.
	const budget = 2
	for _, tt := range []struct {
		name  string
		limit algorithms.Limit
	}{
		{"pass", huge},
		{"deny", algorithms.PerHour(1)},
	} {
		lim := newLimiter(t, memstore.New(), algorithms.FixedWindow, tt.limit)
		h := mustNew(t, lim)(trivial)
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		w := &headerWriter{h: http.Header{}}
		h.ServeHTTP(w, r) // the store's entry for the key is made once
		allocs := testing.AllocsPerRun(1000, func() {
			clear(w.h)
			h.ServeHTTP(w, r)
		})
		if allocs > budget {
			t.Errorf("%s: %.1f allocations per request, budget %d", tt.name, allocs, budget)
		}
		t.Logf("%s: %.1f allocations per request", tt.name, allocs)
	}
}
