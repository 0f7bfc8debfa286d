package algorithms_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
)

// At most two requests per key in flight: a third waits for a release.
// With a Redis store (redisstore.New) every instance shares the
// two slots.
func ExampleNewConcurrency() {
	ctx := context.Background()
	store, err := memstore.New()
	if err != nil {
		panic(err)
	}
	limiter, err := algorithms.NewConcurrency(store, 2, 30*time.Second)
	if err != nil {
		panic(err)
	}
	a, _ := limiter.Acquire(ctx, "user:42")
	b, _ := limiter.Acquire(ctx, "user:42")
	c, _ := limiter.Acquire(ctx, "user:42")
	fmt.Printf("a=%v b=%v c=%v in flight=%d\n", a.Allowed, b.Allowed, c.Allowed, c.InFlight)

	_ = a.Release(ctx) // when a's request ends
	d, _ := limiter.Acquire(ctx, "user:42")
	fmt.Printf("after a release: allowed=%v remaining=%d\n", d.Allowed, d.Remaining)
	_ = b.Release(ctx)
	_ = d.Release(ctx)
	// Output:
	// a=true b=true c=false in flight=2
	// after a release: allowed=true remaining=0
}
