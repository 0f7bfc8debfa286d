package middleware

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
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
			lim := newLimiter(t, memstore.New(), algorithms.FixedWindow, tt.limits...)
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
