package algorithms_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
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

// Validate refuses what New would refuse of one limit, with the error New
// returns, and accepts the rest.
func TestLimitValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit algorithms.Limit
		alg   algorithms.Algorithm
		want  error
	}{
		{"fixed window", algorithms.PerSecond(10), algorithms.FixedWindow, nil},
		{"bucket with burst", algorithms.PerMinute(5).WithBurst(50), algorithms.TokenBucket, nil},
		{"unknown algorithm", algorithms.PerSecond(10), "gcra", algorithms.ErrUnknownAlgorithm},
		{"no rate", algorithms.Limit{Period: time.Second}, algorithms.FixedWindow, algorithms.ErrInvalidLimit},
		{"period under 1ms", algorithms.Limit{Rate: 1, Period: time.Microsecond}, algorithms.LeakyBucket, algorithms.ErrInvalidLimit},
		{"period not in µs", algorithms.Limit{Rate: 1, Period: time.Second + 1}, algorithms.FixedWindow, algorithms.ErrInvalidLimit},
		{"negative burst", algorithms.PerSecond(1).WithBurst(-1), algorithms.TokenBucket, algorithms.ErrInvalidLimit},
		{"log past its rate", algorithms.PerSecond(algorithms.MaxSlidingLogRate + 1), algorithms.SlidingWindowLog, algorithms.ErrInvalidLimit},
		{"counter at that rate", algorithms.PerSecond(algorithms.MaxSlidingLogRate + 1), algorithms.SlidingWindowCounter, nil},
		{"bucket refilling too slowly", algorithms.Limit{Rate: 1, Period: algorithms.MaxPeriod, Burst: algorithms.MaxRate}, algorithms.LeakyBucket, algorithms.ErrInvalidLimit},
		{"window ignores that burst", algorithms.Limit{Rate: 1, Period: algorithms.MaxPeriod, Burst: algorithms.MaxRate}, algorithms.FixedWindow, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := memstore.New()
			if err != nil {
				t.Fatal(err)
			}
			err = tc.limit.Validate(tc.alg)
			if (tc.want == nil) != (err == nil) || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Validate(%s) of %s: %v, want %v", tc.alg, tc.limit, err, tc.want)
			}
			if _, newErr := algorithms.New(store, tc.alg, tc.limit); (newErr == nil) != (err == nil) {
				t.Fatalf("New: %v, Validate: %v", newErr, err)
			}
		})
	}
}
