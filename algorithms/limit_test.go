package algorithms_test

import (
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// A bucket holds Burst, or Rate when Burst is 0.
func TestLimitCapacity(t *testing.T) {
	for _, tc := range []struct {
		limit algorithms.Limit
		want  int
	}{
		{algorithms.PerSecond(10), 10},
		{algorithms.PerSecond(10).WithBurst(3), 3},
		{algorithms.PerMinute(5).WithBurst(50), 50},
		{algorithms.Limit{Rate: 7, Period: time.Hour, Burst: 7}, 7},
	} {
		if got := tc.limit.Capacity(); got != tc.want {
			t.Errorf("%s: Capacity %d, want %d", tc.limit, got, tc.want)
		}
	}
}

// The buckets reserve; the windows do not.
func TestAlgorithmCanReserve(t *testing.T) {
	want := map[algorithms.Algorithm]bool{
		algorithms.FixedWindow:          false,
		algorithms.SlidingWindowLog:     false,
		algorithms.SlidingWindowCounter: false,
		algorithms.TokenBucket:          true,
		algorithms.LeakyBucket:          true,
		"no_such_algorithm":             false,
	}
	for alg, w := range want {
		if got := alg.CanReserve(); got != w {
			t.Errorf("%s: CanReserve %v, want %v", alg, got, w)
		}
	}
}
