package algorithms_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
)

// Shaping: a leaky bucket of 10 a second, burst 1, asked to admit requests
// that can pass within 300ms. The caller waits Delay before going on.
func ExampleRateLimiter_reserve() {
	now := time.Unix(1_800_000_000, 0)
	store, err := memstore.New(memstore.WithClock(func() time.Time { return now }))
	if err != nil {
		panic(err)
	}
	limiter, err := algorithms.New(store, algorithms.LeakyBucket, algorithms.PerSecond(10).WithBurst(1))
	if err != nil {
		panic(err)
	}
	for range 5 {
		res, _ := limiter.Reserve(context.Background(), "user:42", 1, 300*time.Millisecond)
		fmt.Printf("allowed=%v delay=%s retry=%s\n", res.Allowed, res.Delay, res.RetryAfter)
	}
	// Output:
	// allowed=true delay=0s retry=0s
	// allowed=true delay=100ms retry=0s
	// allowed=true delay=200ms retry=0s
	// allowed=true delay=300ms retry=0s
	// allowed=false delay=0s retry=400ms
}
