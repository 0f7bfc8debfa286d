package algorithms_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
)

// A limiter in process memory, with a clock the example moves by hand.
func ExampleNew() {
	now := time.Unix(1_800_000_000, 0)
	store, err := memstore.New(memstore.WithClock(func() time.Time { return now }))
	if err != nil {
		panic(err)
	}
	limiter, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerSecond(2))
	if err != nil {
		panic(err)
	}
	for range 3 {
		r, _ := limiter.Allow(context.Background(), "user:42", 1)
		fmt.Printf("allowed=%v remaining=%d retry=%s\n", r.Allowed, r.Remaining, r.RetryAfter)
	}
	now = now.Add(time.Second)
	r, _ := limiter.Allow(context.Background(), "user:42", 1)
	fmt.Printf("a second later: allowed=%v remaining=%d\n", r.Allowed, r.Remaining)
	// Output:
	// allowed=true remaining=1 retry=0s
	// allowed=true remaining=0 retry=0s
	// allowed=false remaining=0 retry=1s
	// a second later: allowed=true remaining=1
}

// Several limits decided together: a request passes only when both allow it.
func ExampleNew_severalLimits() {
	store, err := memstore.New()
	if err != nil {
		panic(err)
	}
	limiter, err := algorithms.New(store, algorithms.SlidingWindowLog,
		algorithms.PerSecond(10), algorithms.PerHour(1000))
	if err != nil {
		panic(err)
	}
	r, _ := limiter.Allow(context.Background(), "user:42", 1)
	fmt.Println(r.Allowed, r.Limit, r.Remaining, r.Period)
	// Output: true 10 9 1s
}

// An operator looks at a client's state without spending its quota, then
// clears it.
func ExampleRateLimiter_peekAndReset() {
	store, err := memstore.New()
	if err != nil {
		panic(err)
	}
	limiter, err := algorithms.New(store, algorithms.SlidingWindowCounter, algorithms.PerMinute(3))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 3 {
		limiter.Allow(ctx, "user:42", 1)
	}
	r, _ := limiter.Peek(ctx, "user:42")
	fmt.Printf("peek: allowed=%v remaining=%d\n", r.Allowed, r.Remaining)
	if err := limiter.Reset(ctx, "user:42"); err != nil {
		panic(err)
	}
	r, _ = limiter.Peek(ctx, "user:42")
	fmt.Printf("after reset: allowed=%v remaining=%d\n", r.Allowed, r.Remaining)
	// Output:
	// peek: allowed=false remaining=0
	// after reset: allowed=true remaining=2
}

// Charging by outcome: reserve before the work, give back what it did not
// use after it. The age is the time since the reservation was decided.
func ExampleRateLimiter_refund() {
	store, err := memstore.New()
	if err != nil {
		panic(err)
	}
	limiter, err := algorithms.New(store, algorithms.TokenBucket, algorithms.PerHour(10))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	r, _ := limiter.Allow(ctx, "user:42", 5)
	reserved := time.Now()
	fmt.Printf("reserved 5: remaining=%d\n", r.Remaining)
	// The work used 2 units: 3 go back.
	r, _ = limiter.Refund(ctx, "user:42", 3, time.Since(reserved))
	fmt.Printf("after the refund: remaining=%d\n", r.Remaining)
	// A refund never leaves more than the quota.
	r, _ = limiter.Refund(ctx, "user:42", 50, 0)
	fmt.Printf("after refunding too much: remaining=%d\n", r.Remaining)
	// Output:
	// reserved 5: remaining=5
	// after the refund: remaining=8
	// after refunding too much: remaining=10
}

// Charging a cost known only after the work: an export of 1000 rows
// against 10 per hour takes all that is left, so the next request waits.
func ExampleRateLimiter_charge() {
	store, err := memstore.New()
	if err != nil {
		panic(err)
	}
	limiter, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerHour(10))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	r, _ := limiter.Allow(ctx, "user:42", 1)
	fmt.Printf("reserved 1: remaining=%d\n", r.Remaining)
	r, _ = limiter.Charge(ctx, "user:42", 999)
	fmt.Printf("after charging 999: remaining=%d\n", r.Remaining)
	r, _ = limiter.Allow(ctx, "user:42", 1)
	fmt.Printf("next request: allowed=%v\n", r.Allowed)
	// Output:
	// reserved 1: remaining=9
	// after charging 999: remaining=0
	// next request: allowed=false
}
