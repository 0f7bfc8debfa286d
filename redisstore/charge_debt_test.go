package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// A charge far above what is left holds the next request of cost 1 back
// for exactly one period (the refill of a whole burst, for a bucket),
// whatever was left before it: a fraction of a refilled unit, a burst
// unlike the rate, a burst of 1, the sliding window counter's fading
// previous window. Waiting one µs less is not enough, and waiting it is.
// On the memory store and the scripts, each on the test's clock.
func TestChargeHoldsBackOnePeriod(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		algs  []algorithms.Algorithm
		limit algorithms.Limit
		// before sets the key up: admissions, reservations, waits.
		before func(t *testing.T, p *diffPair, key string)
	}{
		// The sliding window counter's first window is not here: a full
		// one holds a request back a tenth of the next window more, as a
		// full window of admissions does (see TestChargeTakesWhatIsLeft).
		{"fresh", []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindowLog, algorithms.TokenBucket, algorithms.LeakyBucket}, algorithms.PerHour(10), nil},
		{"fraction refilled", []algorithms.Algorithm{algorithms.TokenBucket, algorithms.LeakyBucket}, algorithms.PerHour(10),
			func(t *testing.T, p *diffPair, key string) {
				allowBoth(t, p, key, 4)
				p.advance(9 * time.Minute) // a unit and a half back
			}},
		{"burst above rate", []algorithms.Algorithm{algorithms.TokenBucket, algorithms.LeakyBucket}, algorithms.Limit{Rate: 7, Period: time.Second, Burst: 10},
			func(t *testing.T, p *diffPair, key string) {
				allowBoth(t, p, key, 10)
				p.advance(333_333 * time.Microsecond)
			}},
		{"burst of one", []algorithms.Algorithm{algorithms.TokenBucket, algorithms.LeakyBucket}, algorithms.Limit{Rate: 5, Period: time.Second, Burst: 1},
			func(t *testing.T, p *diffPair, key string) {
				allowBoth(t, p, key, 1)
				p.advance(100 * time.Millisecond) // half a unit back
			}},
		{"previous window fading", []algorithms.Algorithm{algorithms.SlidingWindowCounter}, algorithms.PerHour(10),
			func(t *testing.T, p *diffPair, key string) {
				allowBoth(t, p, key, 10)
				p.advance(66 * time.Minute)
				allowBoth(t, p, key, 1) // 9 of the previous window's 10 still count
			}},
	} {
		for _, alg := range tc.algs {
			t.Run(tc.name+"/"+string(alg), func(t *testing.T) {
				p := newDiffPair(t, alg, []algorithms.Limit{tc.limit}, false, time.Minute)
				key := "k"
				if tc.before != nil {
					tc.before(t, p, key)
				}
				for _, l := range []algorithms.RateLimiter{p.mem, p.red} {
					if _, err := l.Charge(ctx, key, 1000); err != nil {
						t.Fatal(err)
					}
				}
				res := allowBoth(t, p, key, 1)
				if res.Allowed || res.RetryAfter != ratemath.WindowOf(alg, tc.limit) {
					t.Fatalf("after the charge: %+v; want a refusal for a whole period, %s", res, ratemath.WindowOf(alg, tc.limit))
				}
				p.advance(res.RetryAfter - time.Microsecond)
				if again := allowBoth(t, p, key, 1); again.Allowed {
					t.Fatalf("admitted 1µs before RetryAfter %s: %+v", res.RetryAfter, again)
				}
				p.advance(time.Microsecond)
				if again := allowBoth(t, p, key, 1); !again.Allowed {
					t.Fatalf("refused after RetryAfter %s: %+v", res.RetryAfter, again)
				}
			})
		}
	}
}

// A bucket that a reservation took deeper into debt than a charge may is
// left as it is by a charge: the next request waits what it waited.
func TestChargeTakesNothingFromDeeperDebt(t *testing.T) {
	ctx := context.Background()
	limit := algorithms.PerHour(10)
	for _, alg := range []algorithms.Algorithm{algorithms.TokenBucket, algorithms.LeakyBucket} {
		t.Run(string(alg), func(t *testing.T) {
			p := newDiffPair(t, alg, []algorithms.Limit{limit}, false, time.Minute)
			for _, l := range []algorithms.RateLimiter{p.mem, p.red} {
				if r, err := l.Reserve(ctx, "k", 10, 0); err != nil || !r.Allowed {
					t.Fatalf("reserve 10: %+v, %v", r, err)
				}
				if r, err := l.Reserve(ctx, "k", 10, time.Hour); err != nil || !r.Allowed {
					t.Fatalf("reserve 10 more within an hour: %+v, %v", r, err)
				}
			}
			before := peekBoth(t, p, "k")
			for _, l := range []algorithms.RateLimiter{p.mem, p.red} {
				if _, err := l.Charge(ctx, "k", 1000); err != nil {
					t.Fatal(err)
				}
			}
			if after := peekBoth(t, p, "k"); after != before {
				t.Errorf("the charge changed a deeper debt: before %+v, after %+v", before, after)
			}
			if before.RetryAfter != 66*time.Minute {
				t.Errorf("RetryAfter %s; want 66m, the refill of the 10 units reserved past empty and one", before.RetryAfter)
			}
		})
	}
}

// allowBoth decides a request of cost for key on both stores of p, which
// must agree.
func allowBoth(t *testing.T, p *diffPair, key string, cost int) algorithms.Result {
	t.Helper()
	ctx := context.Background()
	a, errA := p.mem.Allow(ctx, key, cost)
	b, errB := p.red.Allow(ctx, key, cost)
	if errA != nil || errB != nil || a != b {
		t.Fatalf("allow %d: memory %+v, %v; redis %+v, %v", cost, a, errA, b, errB)
	}
	return a
}

// peekBoth peeks key on both stores of p, which must agree.
func peekBoth(t *testing.T, p *diffPair, key string) algorithms.Result {
	t.Helper()
	ctx := context.Background()
	a, b := peek(ctx, t, p.mem, key), peek(ctx, t, p.red, key)
	if a != b {
		t.Fatalf("peek: memory %+v, redis %+v", a, b)
	}
	return a
}
