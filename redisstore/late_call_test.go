package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestHungRedisOpensBreaker: a hung Redis (a stopped process, whose kernel
// still accepts connections and takes commands) on clients that do not
// end calls at their context's deadline (go-redis's default) and on those
// that do: three stores of 4 keys spent to their limit, then Redis
// freezes and requests come one at a time for 2 s. The breaker opens
// after its run of failures, each a decision that waited its whole
// deadline, and then holds only probes: the slow decisions are at most
// the run (5) plus a probe per open time (1 s, then 2 s) per store, and
// two for the machine's pace. Without lateCall, on the default client,
// every decision waited its deadline (40 in 2 s) until go-redis's
// ReadTimeout (3 s) ended the first calls.
// Bounds hold meanwhile: no key is admitted past L + n.
func TestHungRedisOpensBreaker(t *testing.T) {
	const stores, keys, limit, timeout = 3, 4, 24, 50 * time.Millisecond
	for _, contextTimeouts := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", contextTimeouts), func(t *testing.T) {
			srv := redistest.StartServer(t)
			lim := algorithms.PerHour(limit)
			var ls []algorithms.Limiter
			for range stores {
				c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: contextTimeouts})
				t.Cleanup(func() { _ = c.Close() })
				s := must(New(c, WithTimeout(timeout), WithInstances(stores), WithLogger(quietLogger()),
					WithBreaker(BreakerPolicy{OpenFor: time.Second, MaxOpenFor: 2 * time.Second})))
				t.Cleanup(func() { _ = s.Close(closeCtx()) })
				ls = append(ls, mustNew(t, s, algorithms.FixedWindow, lim))
			}
			ctx := context.Background()
			admitted := make([]int, keys)
			ask := func(i int) time.Duration {
				start := time.Now()
				res, err := ls[i%stores].Allow(ctx, fmt.Sprint("k", (i/stores)%keys), 1)
				if err != nil {
					t.Fatal(err)
				}
				if res.Allowed {
					admitted[(i/stores)%keys]++
				}
				return time.Since(start)
			}
			for i := range keys * limit {
				ask(i)
			}
			srv.Freeze()
			defer srv.Thaw()
			slow, asked := 0, 0
			for start := time.Now(); time.Since(start) < 2*time.Second; asked++ {
				if ask(asked) >= timeout*3/4 {
					slow++
				}
			}
			// The run of 5 failures, then a probe after 1 s (the next
			// comes 2 s later), and two for the pace, per store.
			most := stores * (5 + 1 + 2)
			t.Logf("%d of %d decisions waited their deadline (at most %d)", slow, asked, most)
			if slow > most {
				t.Errorf("%d decisions waited their deadline through a hung Redis, want at most %d", slow, most)
			}
			for k, a := range admitted {
				if a > limit+stores {
					t.Errorf("key %d: %d admitted, want at most L + n = %d", k, a, limit+stores)
				}
			}
		})
	}
}
