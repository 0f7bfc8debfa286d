package algorithms_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
)

// Pacing the calls to an upstream that takes 10 a second, one at a time:
// each call waits its turn. On a Redis store every instance waiting on the
// same key keeps within the 10 a second together.
func ExampleWait() {
	store, err := memstore.New()
	if err != nil {
		panic(err)
	}
	upstream, err := algorithms.New(store, algorithms.TokenBucket, algorithms.PerSecond(10).WithBurst(1))
	if err != nil {
		panic(err)
	}
	callUpstream := func(n int) { fmt.Println("call", n, "sent") }

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for n := 1; n <= 3; n++ {
		if _, err := algorithms.Wait(ctx, upstream, "payments-api", 1); err != nil {
			fmt.Println("call", n, "not sent:", err)
			continue
		}
		callUpstream(n) // the second and third wait 100ms each
	}

	// A call whose turn is further off than its deadline fails at once.
	short, cancelShort := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancelShort()
	_, err = algorithms.Wait(short, upstream, "payments-api", 1)
	fmt.Println("fails at once:", errors.Is(err, algorithms.ErrWaitExceedsDeadline))
	// Output:
	// call 1 sent
	// call 2 sent
	// call 3 sent
	// fails at once: true
}
