package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// waitStores returns a limiter of alg and lim on each of three stores on
// separate clients of addr, sharing the limit.
func waitStores(t *testing.T, addr string, alg algorithms.Algorithm, lim algorithms.Limit, opts ...Option) []algorithms.RateLimiter {
	t.Helper()
	var ls []algorithms.RateLimiter
	for range 3 {
		c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 16})
		t.Cleanup(func() { _ = c.Close() })
		// A deadline that holds under -race on a busy machine: this test
		// is about Redis answering.
		s := must(New(c, append([]Option{WithInstances(3), WithLogger(quietLogger()), WithEvictionAllowed(), WithTimeout(10 * time.Second)}, opts...)...))
		t.Cleanup(func() { _ = s.Close(closeCtx()) })
		l, err := algorithms.New(s, alg, lim)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	return ls
}

// waited is one admission of algorithms.Wait: when it returned, since the
// run began, and its Result.
type waited struct {
	at  time.Duration
	res algorithms.Result
}

// A distributed Wait: three stores on separate clients share a limit of 20
// a second, and 6 goroutines (two on each) Wait for one key for 1.5 s,
// exact and under WithLeases(100ms). Every Wait returns an admission; the
// fixed window admits at most 20 in each window (grouped by the window's
// end, when the Wait returned plus its ResetAfter), and the token bucket
// (burst 10) at most Burst + Rate × (t + ttl) by each time t of the run.
// Then a Wait whose turn is past its 100 ms deadline fails with
// ErrWaitExceedsDeadline before the deadline, and takes nothing. The
// cases, each under a prefix of its own, run side by side: they mostly
// wait, and a late answer only takes from what is admitted.
func TestWaitAcrossStores(t *testing.T) {
	addr := redistest.Standalone(t)
	const goroutines, run = 6, 1500 * time.Millisecond
	for _, tc := range []struct {
		alg algorithms.Algorithm
		lim algorithms.Limit
		ttl time.Duration
	}{
		{algorithms.FixedWindow, algorithms.PerSecond(20), 0},
		{algorithms.FixedWindow, algorithms.PerSecond(20), 100 * time.Millisecond},
		{algorithms.TokenBucket, algorithms.PerSecond(20).WithBurst(10), 0},
		{algorithms.TokenBucket, algorithms.PerSecond(20).WithBurst(10), 100 * time.Millisecond},
	} {
		name := fmt.Sprintf("%s/exact", tc.alg)
		opts := []Option{WithPrefix("wait-" + string(tc.alg) + "-exact-")}
		if tc.ttl > 0 {
			name = fmt.Sprintf("%s/leased", tc.alg)
			opts = []Option{WithPrefix("wait-" + string(tc.alg) + "-leased-"), WithLeases(tc.ttl)}
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ls := waitStores(t, addr, tc.alg, tc.lim, opts...)
			var mu sync.Mutex
			var admitted []waited
			began := time.Now()
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for time.Since(began) < run {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						res, err := algorithms.Wait(ctx, ls[g%len(ls)], "upstream", 1)
						at := time.Since(began)
						cancel()
						if err != nil || !res.Allowed {
							t.Errorf("Wait: %+v, %v", res, err)
							return
						}
						mu.Lock()
						admitted = append(admitted, waited{at, res})
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(began)
			if len(admitted) < tc.lim.Rate {
				t.Errorf("%d admitted in %s", len(admitted), elapsed)
			}
			if tc.alg == algorithms.FixedWindow {
				counts := perWindow(admitted)
				for _, n := range counts {
					if n > tc.lim.Rate {
						t.Errorf("%d admitted in one window, limit %d (windows %v)", n, tc.lim.Rate, counts)
					}
				}
				t.Logf("%d admitted in %s, per window %v", len(admitted), elapsed.Round(time.Millisecond), counts)
			} else {
				slices.SortFunc(admitted, func(a, b waited) int { return int(a.at - b.at) })
				worst := 0.0
				for k, w := range admitted {
					span := w.at + tc.ttl
					bound := tc.lim.Burst + int((int64(tc.lim.Rate)*int64(span)+int64(tc.lim.Period)-1)/int64(tc.lim.Period))
					if k+1 > bound {
						t.Errorf("%d admitted by %s, bound %d", k+1, w.at, bound)
					}
					worst = max(worst, float64(k+1)/float64(bound))
				}
				t.Logf("%d admitted in %s, at most %.0f%% of Burst + Rate × (t + ttl)", len(admitted), elapsed.Round(time.Millisecond), 100*worst)
			}
			waitPastDeadline(t, ls, tc.alg)
		})
	}
}

// perWindow counts the admissions of a fixed window of 1 s by the
// window's end (when Wait returned plus ResetAfter): ends closer than half
// a window are one window's, seen a little apart.
func perWindow(admitted []waited) []int {
	ends := make([]time.Duration, len(admitted))
	for i, w := range admitted {
		ends[i] = w.at + w.res.ResetAfter
	}
	slices.Sort(ends)
	var counts []int
	for i, e := range ends {
		if i == 0 || e-ends[i-1] > 500*time.Millisecond {
			counts = append(counts, 0)
		}
		counts[len(counts)-1]++
	}
	return counts
}

// waitPastDeadline spends on one store, then Waits on another for a cost
// whose turn is further off than a 100 ms deadline: the Wait fails with
// ErrWaitExceedsDeadline before the deadline, and the third store finds
// the units it did not take.
func waitPastDeadline(t *testing.T, ls []algorithms.RateLimiter, alg algorithms.Algorithm) {
	t.Helper()
	bg := context.Background()
	const key = "short-deadline"
	spend, ask := 10, 15 // of a window of 20; what is left after a lease is 8 to 10
	if alg.CanReserve() {
		spend, ask = 10, 10 // of a burst of 10, refilled at 20 a second
	}
	if res, err := ls[0].Allow(bg, key, spend); err != nil || !res.Allowed {
		t.Fatalf("spending %d: %+v, %v", spend, res, err)
	}
	ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	defer cancel()
	began := time.Now()
	res, err := algorithms.Wait(ctx, ls[1], key, ask)
	took, ctxErr := time.Since(began), ctx.Err()
	if !errors.Is(err, algorithms.ErrWaitExceedsDeadline) || res.Allowed || ctxErr != nil {
		t.Errorf("Wait past the deadline: %+v, %v after %s (context %v); want ErrWaitExceedsDeadline before the deadline", res, err, took, ctxErr)
	}
	if alg.CanReserve() {
		// A token refills in 50 ms; had the Wait reserved its 10, the
		// next would be 550 ms away.
		if p, err := ls[2].Peek(bg, key); err != nil || p.RetryAfter > 250*time.Millisecond {
			t.Errorf("after the failed Wait, Peek says %+v, %v; want a token within 250ms", p, err)
		}
	} else if res, err := ls[2].Allow(bg, key, 5); err != nil || !res.Allowed {
		t.Errorf("after the failed Wait, 5 more: %+v, %v; want them admitted", res, err)
	}
	t.Logf("a turn past the deadline: %v, in %s", err, took.Round(time.Microsecond))
}
