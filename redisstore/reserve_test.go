package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memstore"
)

func mustReserver(t *testing.T, store algorithms.Store, alg algorithms.Algorithm, limits ...algorithms.Limit) algorithms.RateLimiter {
	t.Helper()
	r, ok := mustNew(t, store, alg, limits...).(algorithms.RateLimiter)
	if !ok {
		t.Fatalf("%s limiter is no algorithms.RateLimiter", alg)
	}
	return r
}

// Ten requests at one instant against 10/s burst 1 with a delay of up to
// 500ms: one passes at once, five are told to wait 100ms apart, four are
// refused with the wait they would need.
func TestReserveSchedule(t *testing.T) {
	for _, alg := range []algorithms.Algorithm{algorithms.LeakyBucket, algorithms.TokenBucket} {
		t.Run(string(alg), func(t *testing.T) {
			clock := storetest.NewManualClock(start)
			r := mustReserver(t, must(memstore.New(memstore.WithClock(clock.Now))), alg, algorithms.PerSecond(10).WithBurst(1))
			var delays []time.Duration
			for i := range 10 {
				res, err := r.Reserve(context.Background(), "k", 1, 500*ms)
				if err != nil {
					t.Fatal(err)
				}
				if !res.Allowed {
					if i < 6 || res.RetryAfter != 600*ms || res.Delay != 0 {
						t.Fatalf("request %d: %+v; want the 7th on refused with RetryAfter 600ms", i, res)
					}
					continue
				}
				if res.Remaining != 0 || res.RetryAfter != 0 {
					t.Fatalf("request %d: %+v", i, res)
				}
				delays = append(delays, res.Delay)
			}
			want := []time.Duration{0, 100 * ms, 200 * ms, 300 * ms, 400 * ms, 500 * ms}
			if fmt.Sprint(delays) != fmt.Sprint(want) {
				t.Fatalf("delays %v, want %v", delays, want)
			}
			// The slots are taken: 599ms on, a request still has to wait.
			clock.Advance(599 * ms)
			if res, _ := r.Reserve(context.Background(), "k", 1, 0); res.Allowed {
				t.Fatalf("allowed before the reserved slots drained: %+v", res)
			}
			clock.Advance(ms)
			if res, _ := r.Reserve(context.Background(), "k", 1, 0); !res.Allowed || res.Delay != 0 {
				t.Fatalf("refused once the reserved slots drained: %+v", res)
			}
		})
	}
}

// The same on a real Redis server and a real Cluster, whose clocks move
// between requests: the delays are 100ms apart less the time the calls
// took.
func TestRedisReserveSchedule(t *testing.T) {
	addr := redistest.Standalone(t)
	single := redis.NewClient(&redis.Options{Addr: addr})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.Cluster(t)})
	t.Cleanup(func() { single.Close(); cluster.Close() })
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		alg    algorithms.Algorithm
	}{
		{"single server/leaky", single, algorithms.LeakyBucket}, {"single server/token", single, algorithms.TokenBucket},
		{"cluster/leaky", cluster, algorithms.LeakyBucket}, {"cluster/token", cluster, algorithms.TokenBucket},
	} {
		c, alg := tc.client, tc.alg
		t.Run(tc.name, func(t *testing.T) {
			r := mustReserver(t, must(New(c, WithPrefix("reserve-"+string(alg)))), alg, algorithms.PerSecond(10).WithBurst(1))
			began := time.Now()
			var delays []time.Duration
			refused := 0
			for range 10 {
				res, err := r.Reserve(context.Background(), "k", 1, 500*ms)
				if err != nil {
					t.Fatal(err)
				}
				if res.Decider != algorithms.DecidedByStore && res.Decider != algorithms.DecidedByCache {
					t.Fatalf("decided by %s", res.Decider)
				}
				if res.Allowed {
					delays = append(delays, res.Delay)
				} else {
					refused++
				}
			}
			took := time.Since(began)
			if len(delays) < 5 || len(delays) > 6 || refused != 10-len(delays) {
				t.Fatalf("%d passed (delays %v), %d refused; want 5 or 6 passed", len(delays), delays, refused)
			}
			for i, d := range delays {
				if want := time.Duration(i) * 100 * ms; d > want || d < want-took {
					t.Fatalf("delay %d is %s, want %s less at most %s: %v", i, d, want, took, delays)
				}
			}
		})
	}
}

func TestReserveRefused(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	stores := map[string]algorithms.Store{"memory": must(memstore.New()), "redis": must(New(c))}
	for name, store := range stores {
		for _, alg := range algorithms.All() {
			t.Run(name+"/"+string(alg), func(t *testing.T) {
				l := mustNew(t, store, alg, algorithms.PerSecond(10))
				r := l.(algorithms.RateLimiter)
				buckets := alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket
				if got := r.Algorithm().CanReserve(); got != buckets {
					t.Fatalf("Algorithm().CanReserve %v", got)
				}
				_, err := r.Reserve(ctx, "k", 1, 100*ms)
				if buckets != (err == nil) {
					t.Fatalf("Reserve: %v", err)
				}
				if err != nil && !errors.Is(err, algorithms.ErrInvalidOption) {
					t.Fatalf("Reserve: %v, want algorithms.ErrInvalidOption", err)
				}
				for _, d := range []time.Duration{-1, algorithms.MaxDelay + 1} {
					if _, err := r.Reserve(ctx, "k", 1, d); !errors.Is(err, algorithms.ErrInvalidOption) {
						t.Fatalf("Reserve with delay %s: %v, want algorithms.ErrInvalidOption", d, err)
					}
				}
				if buckets {
					if _, err := r.Reserve(ctx, "", 1, ms); !errors.Is(err, algorithms.ErrInvalidKey) {
						t.Fatalf("empty key: %v", err)
					}
					if _, err := r.Reserve(ctx, "k", 11, ms); !errors.Is(err, algorithms.ErrCostExceedsLimit) {
						t.Fatalf("cost 11: %v", err)
					}
				}
			})
		}
	}
	if (*redisLimiter)(nil).Algorithm().CanReserve() {
		t.Fatal("Algorithm().CanReserve of a nil limiter")
	}
}

// Several limits: the delay is the longest of theirs, and a request that
// one of them would make wait too long is charged to none.
func TestReserveSeveralLimits(t *testing.T) {
	m := miniredis.RunT(t)
	m.SetTime(start)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	for _, alg := range []algorithms.Algorithm{algorithms.LeakyBucket, algorithms.TokenBucket} {
		limits := []algorithms.Limit{algorithms.PerSecond(10).WithBurst(1), algorithms.PerSecond(2)} // 100ms and 500ms a request
		stores := map[string]algorithms.Store{
			"memory": must(memstore.New(memstore.WithClock(func() time.Time { return start }))),
			"redis":  must(New(c, WithPrefix(string(alg)), WithDenialCache(0))),
		}
		for name, store := range stores {
			t.Run(string(alg)+"/"+name, func(t *testing.T) {
				r := mustReserver(t, store, alg, limits...)
				want := []struct {
					allowed bool
					delay   time.Duration
				}{{true, 0}, {true, 100 * ms}, {true, 500 * ms}, {false, 0}, {false, 0}}
				for i, w := range want {
					res, err := r.Reserve(context.Background(), "k", 1, 500*ms)
					if err != nil {
						t.Fatal(err)
					}
					if res.Allowed != w.allowed || res.Delay != w.delay {
						t.Fatalf("request %d: %+v, want allowed %v delay %s", i, res, w.allowed, w.delay)
					}
				}
				// Neither limit was charged for the refusals: the second
				// limit's wait is still a second, the first's 300ms.
				res, err := r.Reserve(context.Background(), "k", 1, time.Hour)
				if err != nil || !res.Allowed || res.Delay != time.Second {
					t.Fatalf("%+v %v, want a delay of 1s", res, err)
				}
			})
		}
	}
}

// Random sequences of reservations and plain requests, with the clock going
// forward and (in the second run) back: memory and the scripts give the same
// Results, and, with the clock going forward, the times at which the
// admitted requests proceed never take more than the limit allows in any
// interval: cost × period ≤ burst × period + span × rate, the span
// rounded up to the µs.
func TestDifferentialReservations(t *testing.T) {
	// The last two count time in a unit coarser than 1µs (see paramsFor).
	sets := append(differentialLimits[:len(differentialLimits):len(differentialLimits)],
		[]algorithms.Limit{{Rate: 3, Period: time.Hour, Burst: 2_000_000}},
		[]algorithms.Limit{{Rate: 7, Period: 7 * time.Minute, Burst: 30_000_000}, algorithms.PerSecond(5)})
	for _, alg := range []algorithms.Algorithm{algorithms.LeakyBucket, algorithms.TokenBucket} {
		for li, limits := range sets {
			for _, back := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%c/back=%v", alg, 'a'+li, back), func(t *testing.T) {
					t.Parallel()
					runReserveDifferential(t, alg, limits, uint64(li)+7, back)
				})
			}
		}
	}
}

func runReserveDifferential(t *testing.T, alg algorithms.Algorithm, limits []algorithms.Limit, seed uint64, clockBack bool) {
	p := newDiffPair(t, alg, limits, clockBack, 100*365*24*time.Hour)
	mem, red := p.mem, p.red
	clock, advance, maxCost := p.clock, p.advance, p.maxCost
	type proceed struct {
		at   time.Time
		cost int
	}
	proceeds := map[string][]proceed{}
	rng := rand.New(rand.NewPCG(seed, 3))
	keys := []string{"x", "y"}
	period := limits[0].Period
	for step := range stepsOf(300) {
		switch r := rng.IntN(10); {
		case r < 4:
			advance(randMicros(rng, period/4))
		case r < 5 && clockBack:
			advance(-randMicros(rng, period/2))
		}
		key, cost := keys[rng.IntN(len(keys))], 1+rng.IntN(maxCost)
		var maxDelay time.Duration
		if rng.IntN(4) != 0 {
			maxDelay = randMicros(rng, min(2*period, algorithms.MaxDelay))
		}
		a, err := mem.Reserve(context.Background(), key, cost, maxDelay)
		if err != nil {
			t.Fatal(err)
		}
		b, err := red.Reserve(context.Background(), key, cost, maxDelay)
		if err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Fatalf("step %d (key %s, cost %d, delay %s): stores disagree\n memory %+v\n redis  %+v", step, key, cost, maxDelay, a, b)
		}
		switch {
		case a.Delay < 0 || a.Delay > maxDelay:
			t.Fatalf("step %d: delay %s outside [0, %s]", step, a.Delay, maxDelay)
		case !a.Allowed && (a.Delay != 0 || a.RetryAfter <= maxDelay):
			t.Fatalf("step %d: refused with delay %s, RetryAfter %s within the delay %s", step, a.Delay, a.RetryAfter, maxDelay)
		case a.Allowed && a.Delay > 0 && a.Remaining != 0:
			t.Fatalf("step %d: delayed with %d remaining", step, a.Remaining)
		}
		if a.Allowed {
			proceeds[key] = append(proceeds[key], proceed{clock().Add(a.Delay), cost})
		}
	}
	if clockBack || len(limits) > 1 {
		return
	}
	l := limits[0]
	for key, ps := range proceeds {
		// Sorted by time: each proceeds no earlier than the one before.
		for i := 1; i < len(ps); i++ {
			if ps[i].at.Before(ps[i-1].at) {
				t.Fatalf("key %s: request %d proceeds at %s, before the one before it at %s", key, i, ps[i].at, ps[i-1].at)
			}
		}
		for i := range ps {
			sum := 0
			for j := i; j < len(ps); j++ {
				sum += ps[j].cost
				// A wait is rounded up to the µs: a span may be short of
				// the exact one by less than one.
				span := ps[j].at.Sub(ps[i].at).Microseconds() + 1
				if int64(sum)*l.Period.Microseconds() > int64(l.Capacity())*l.Period.Microseconds()+span*int64(l.Rate) {
					t.Fatalf("key %s: %d units proceed within %dµs, more than %s allows", key, sum, span, l)
				}
			}
		}
	}
}

// The excess a leaky bucket's reservation leaves is kept beside the entry,
// in a column the table makes only then, and follows the entry as others
// come and go: a clock that steps back then clamps the backlog to the
// capacity plus that excess, not to the capacity alone.
func TestMemoryReservedExcessKept(t *testing.T) {
	clock := storetest.NewManualClock(start)
	store := must(memstore.New(memstore.WithClock(clock.Now)))
	l := mustNew(t, store, algorithms.LeakyBucket, algorithms.PerSecond(1).WithBurst(1))
	r := l.(algorithms.RateLimiter)
	ctx := context.Background()
	key := func(i int) string { return fmt.Sprintf("k%d", i) }
	for i := range 200 {
		if res, _ := l.Allow(ctx, key(i), 1); !res.Allowed {
			t.Fatal(res)
		}
	}
	for _, i := range []int{7, 150} {
		if res, _ := r.Reserve(ctx, key(i), 1, time.Hour); res.Delay != time.Second {
			t.Fatalf("key %d: %+v", i, res)
		}
	}
	// Others come and go, moving entries within their tables.
	for i := 200; i < 400; i++ {
		l.Allow(ctx, key(i), 1)
	}
	for i := range 400 {
		if i != 7 && i != 150 && i%3 != 0 {
			if err := l.(algorithms.RateLimiter).Reset(ctx, key(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Backlogs of 2s; the clock steps back 500ms, making them look 2.5s.
	clock.Advance(-500 * ms)
	for _, i := range []int{7, 150} {
		res, _ := r.Reserve(ctx, key(i), 1, time.Hour)
		if res.Delay != 2*time.Second {
			t.Fatalf("key %d: %+v, want a delay of 2s (backlog clamped to 2s)", i, res)
		}
	}
	if res, _ := r.Reserve(ctx, key(3), 1, time.Hour); res.Delay != time.Second {
		t.Fatalf("key 3: %+v, want a delay of 1s (backlog clamped to 1s)", res)
	}
}
