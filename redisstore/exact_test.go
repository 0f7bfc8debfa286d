package redisstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/internal/ratemath"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memstore"
)

// Limits at every scale, primes and the extremes included: every algorithm
// but the sliding window log takes them all, exactly.
var largeLimits = []algorithms.Limit{
	algorithms.PerSecond(3),
	{Rate: 1_000_000, Period: 24 * time.Hour},
	{Rate: 10_000_000, Period: 720 * time.Hour},
	{Rate: 999_999_937, Period: 24 * time.Hour},                    // a prime rate
	{Rate: 999_999_937, Period: 86_400_000_067 * time.Microsecond}, // prime rate, prime period in µs
	{Rate: 999_999_937, Period: 4_999_999 * time.Microsecond},
	{Rate: algorithms.MaxRate, Period: algorithms.MaxPeriod},
	{Rate: 999_999_937, Period: algorithms.MaxPeriod},
	{Rate: algorithms.MaxRate, Period: time.Millisecond},
	{Rate: 10_000_019, Period: 360 * 24 * time.Hour, Burst: algorithms.MaxRate}, // refills in 98.6 years
	{Rate: 1, Period: algorithms.MaxPeriod, Burst: 99},
	{Rate: 7, Period: 333_333 * time.Microsecond, Burst: algorithms.MaxRate},
}

// The largest limits the sliding window log takes.
var largeLogLimits = []algorithms.Limit{
	{Rate: algorithms.MaxSlidingLogRate, Period: time.Millisecond},
	{Rate: algorithms.MaxSlidingLogRate, Period: algorithms.MaxPeriod},
	{Rate: 9_973, Period: 86_400_000_067 * time.Microsecond},
}

// largeLimitsFor is largeLimits, or for the sliding window log
// largeLogLimits.
func largeLimitsFor(alg algorithms.Algorithm) []algorithms.Limit {
	if alg == algorithms.SlidingWindowLog {
		return largeLogLimits
	}
	return largeLimits
}

// Every Result is the same from memory and from the scripts, and waiting
// RetryAfter is enough while waiting one µs less is not, whatever the unit
// the limit computes in; and so while the clock steps back and forth.
func TestDifferentialLargeLimits(t *testing.T) {
	for _, alg := range algorithms.All() {
		for _, l := range largeLimitsFor(alg) {
			for _, steps := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/steps=%v", alg, l, steps)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					runDifferential(t, alg, []algorithms.Limit{l}, uint64(l.Rate)^uint64(l.Period), steps)
				})
			}
		}
	}
}

// Each limit gets the unit the README documents, and every number its
// algorithm computes stays within 2^53.
func TestUnits(t *testing.T) {
	tests := []struct {
		alg   algorithms.Algorithm
		limit algorithms.Limit
		unit  int64
	}{
		{algorithms.SlidingWindowCounter, algorithms.PerSecond(3), 1},
		{algorithms.TokenBucket, algorithms.PerSecond(3), 1},
		{algorithms.LeakyBucket, algorithms.Limit{Rate: 1_000_000, Period: 24 * time.Hour}, 1},
		{algorithms.TokenBucket, algorithms.Limit{Rate: 10_000_000, Period: 720 * time.Hour}, 1},
		{algorithms.SlidingWindowCounter, algorithms.Limit{Rate: 104_249, Period: 24 * time.Hour}, 1},
		{algorithms.SlidingWindowCounter, algorithms.Limit{Rate: 1_000_000, Period: 24 * time.Hour}, 10},
		{algorithms.SlidingWindowCounter, algorithms.Limit{Rate: algorithms.MaxRate, Period: time.Hour}, 400},
		{algorithms.SlidingWindowCounter, algorithms.Limit{Rate: algorithms.MaxRate, Period: algorithms.MaxPeriod}, 3_513_600},
		{algorithms.TokenBucket, algorithms.Limit{Rate: 999_999_937, Period: 24 * time.Hour}, 19_200},
		{algorithms.LeakyBucket, algorithms.Limit{Rate: algorithms.MaxRate, Period: algorithms.MaxPeriod}, 1},
		{algorithms.LeakyBucket, algorithms.Limit{Rate: 999_999_937, Period: 4_999_999 * time.Microsecond}, 4_999_999},
		{algorithms.FixedWindow, algorithms.Limit{Rate: algorithms.MaxRate, Period: algorithms.MaxPeriod}, 1},
	}
	for _, tt := range tests {
		p := ratemath.ParamsFor(tt.alg, tt.limit)
		if p.Unit != tt.unit {
			t.Errorf("%s %s: unit %dµs, want %dµs", tt.alg, tt.limit, p.Unit, tt.unit)
		}
		if tt.limit.Period.Microseconds() != p.Period*p.Unit*(int64(tt.limit.Rate)/p.Rate) {
			t.Errorf("%s %s: %+v is not the limit's rate per period", tt.alg, tt.limit, p)
		}
		var largest int64
		switch tt.alg {
		case algorithms.SlidingWindowCounter:
			largest = p.Rate * p.Period
		case algorithms.TokenBucket, algorithms.LeakyBucket:
			largest = 2 * p.Burst * p.Period
		}
		if largest > ratemath.MaxExact {
			t.Errorf("%s %s: %d passes 2^53", tt.alg, tt.limit, largest)
		}
	}
}

// steppedStores returns a memory limiter and a miniredis one for the same
// limits, both on one clock that the returned function sets.
func steppedStores(t *testing.T, alg algorithms.Algorithm, limits ...algorithms.Limit) (mem, red algorithms.Limiter, set func(time.Time)) {
	t.Helper()
	store, setServer := miniredisStore(t)
	now := start
	clock := func() time.Time { return now }
	mem, err := algorithms.New(must(memstore.New(memstore.WithClock(clock))), alg, limits...)
	if err != nil {
		t.Fatal(err)
	}
	red, err = algorithms.New(store, alg, limits...)
	if err != nil {
		t.Fatal(err)
	}
	return mem, red, func(at time.Time) { now = at; setServer(at) }
}

// A clock that steps back never makes RetryAfter a lie: PerSecond(2), two
// requests at T, the clock back to T − 0.5s, a third request.
func TestClockStepBackKeepsRetryAfter(t *testing.T) {
	for _, alg := range algorithms.All() {
		for _, back := range []time.Duration{500 * ms, 999 * ms, 10 * time.Second} {
			t.Run(fmt.Sprintf("%s/%s", alg, back), func(t *testing.T) {
				mem, red, set := steppedStores(t, alg, algorithms.PerSecond(2))
				for name, l := range map[string]algorithms.Limiter{"memory": mem, "redis": red} {
					at := start.Add(time.Duration(len(name)) * time.Hour) // each store its own time
					set(at)
					mustAllow(t, l, 2, true)
					set(at.Add(-back))
					res := mustAllow(t, l, 1, false)
					if res.RetryAfter > longestWait(alg, time.Second) || res.ResetAfter > 2*time.Second {
						t.Errorf("%s: %+v: longer than the limit can justify", name, res)
					}
					set(at.Add(-back + res.RetryAfter - time.Microsecond))
					mustAllow(t, l, 1, false)
					set(at.Add(-back + res.RetryAfter))
					mustAllow(t, l, 1, true)
				}
			})
		}
	}
}

// A clock an hour fast that is corrected holds a used-up key back at most
// one period (for the buckets, one refill) from the corrected now, and the
// RetryAfter it gives is kept.
func TestClockAheadCorrected(t *testing.T) {
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			mem, red, set := steppedStores(t, alg, algorithms.PerMinute(2))
			for name, l := range map[string]algorithms.Limiter{"memory": mem, "redis": red} {
				at := start.Add(time.Duration(len(name)) * 24 * time.Hour)
				set(at.Add(time.Hour))
				mustAllow(t, l, 2, true)
				set(at)
				res := mustAllow(t, l, 1, false)
				if res.RetryAfter > longestWait(alg, time.Minute) || res.ResetAfter > 2*time.Minute {
					t.Fatalf("%s: %+v after the correction: held back longer than a period", name, res)
				}
				set(at.Add(res.RetryAfter - time.Microsecond))
				mustAllow(t, l, 1, false)
				set(at.Add(res.RetryAfter))
				mustAllow(t, l, 1, true)
			}
		})
	}
}

// longestWait is the longest RetryAfter a request of cost 1 can get from
// a limit of period with a monotonic clock: a period, but for the sliding
// window counter, whose current window fades out only over the next one,
// two.
func longestWait(alg algorithms.Algorithm, period time.Duration) time.Duration {
	if alg == algorithms.SlidingWindowCounter {
		return 2 * period
	}
	return period
}

// mustAllow asks for cost on key "k" and fails unless the answer is want.
func mustAllow(t *testing.T, l algorithms.Limiter, cost int, want bool) algorithms.Result {
	t.Helper()
	res, err := l.Allow(context.Background(), "k", cost)
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed != want {
		t.Fatalf("Allow(cost %d) = %+v, want allowed %v", cost, res, want)
	}
	return res
}

// On real servers the scripts take every large limit and answer as the
// memory store does: exactly for the counts, within the round trip for the
// durations.
func TestLargeLimitsOnRedis(t *testing.T) {
	addr := redistest.Standalone(t)
	addrs := redistest.Cluster(t)
	clients := map[string]redis.UniversalClient{
		"redis":   redis.NewClient(&redis.Options{Addr: addr}),
		"cluster": redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs}),
	}
	for _, c := range clients {
		t.Cleanup(func() { c.Close() })
	}
	ctx := context.Background()
	for name, c := range clients {
		store := must(New(c, WithPrefix(fmt.Sprintf("large%d", prefixes.Add(1))), WithDenialCache(0)))
		for _, alg := range algorithms.All() {
			for i, l := range largeLimitsFor(alg) {
				if l.Period < time.Hour {
					continue // state that moves within a round trip: miniredis tests it
				}
				red, err := algorithms.New(store, alg, l)
				if err != nil {
					t.Fatalf("%s %s %s: %v", name, alg, l, err)
				}
				mem, err := algorithms.New(must(memstore.New()), alg, l)
				if err != nil {
					t.Fatal(err)
				}
				key := fmt.Sprintf("k%d", i)
				q := ratemath.QuotaOf(alg, l)
				for _, cost := range []int{q - 1, 1, 1} {
					if cost == 0 {
						continue
					}
					want, _ := mem.Allow(ctx, key, cost)
					got, err := red.Allow(ctx, key, cost)
					if err != nil {
						t.Fatalf("%s %s %s: %v", name, alg, l, err)
					}
					if got.Decider != algorithms.DecidedByStore {
						t.Fatalf("%s %s %s: decided by %s", name, alg, l, got.Decider)
					}
					// What a bucket refills during a round trip (up to 100ms).
					slack := int(int64(l.Rate) * int64(100*ms) / int64(l.Period))
					if d := got.Remaining - want.Remaining; d >= -slack && d <= slack {
						got.Remaining = want.Remaining
					}
					if got.Allowed != want.Allowed && max(got.RetryAfter, want.RetryAfter) <= 100*ms {
						// The two calls fell on either side of the instant
						// the request fits, a round trip apart.
						continue
					}
					if msg := storetest.CompareResult(got, want, 100*ms); msg != "" {
						t.Errorf("%s %s %s cost %d: %s\n got  %+v\n want %+v", name, alg, l, cost, msg, got, want)
					}
				}
			}
		}
	}
}

// miniredisStore returns a Redis store on miniredis and a function that
// sets the server's clock: TIME follows it, and key expiry follows it
// forward (a real server's keys live longer, not shorter, when its clock
// steps back).
func miniredisStore(t *testing.T) (algorithms.Store, func(time.Time)) {
	t.Helper()
	m := miniredis.RunT(t)
	m.SetTime(start)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	last := start
	return must(New(c, WithDenialCache(0), WithTimeout(time.Minute))), func(at time.Time) {
		m.SetTime(at)
		if at.After(last) {
			m.FastForward(at.Sub(last))
			last = at
		}
	}
}

func TestDivisors(t *testing.T) {
	for _, n := range []int64{1, 2, 12, 97, 86_400_000_000, 86_400_000_067, 4_999_999, 31_622_400_000_000} {
		var want []int64
		for d := int64(1); d <= n && d <= 1_000_000; d++ {
			if n%d == 0 {
				want = append(want, d)
			}
		}
		got := ratemath.Divisors(n)
		if got[len(got)-1] != n {
			t.Errorf("divisors(%d) end with %d", n, got[len(got)-1])
		}
		var small []int64
		for _, d := range got {
			if n%d != 0 {
				t.Errorf("divisors(%d) holds %d", n, d)
			}
			if d <= 1_000_000 {
				small = append(small, d)
			}
		}
		if !slices.Equal(small, want) {
			t.Errorf("divisors(%d) up to 10^6 = %v, want %v", n, small, want)
		}
	}
}

// A sliding log written by the former scripts, one member "<time>:<n>" per
// unit, is read as the same log after an upgrade.
func TestSlidingLogReadsTheFormerFormat(t *testing.T) {
	m := miniredis.RunT(t)
	m.SetTime(start)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	at := start.UnixMicro()
	key := "rl:{k}:swl:5:1000000"
	for n := 1; n <= 3; n++ {
		c.ZAdd(ctx, key, redis.Z{Score: float64(at), Member: fmt.Sprintf("%d:%d", at, n)})
	}
	m.SetTime(start.Add(100 * ms))
	l, err := algorithms.New(must(New(c, WithDenialCache(0), WithTimeout(time.Minute))), algorithms.SlidingWindowLog, algorithms.PerSecond(5))
	if err != nil {
		t.Fatal(err)
	}
	if res := mustAllow(t, l, 2, true); res.Remaining != 0 {
		t.Fatalf("%+v, want 0 remaining", res)
	}
	if res := mustAllow(t, l, 1, false); res.RetryAfter != 900*ms {
		t.Fatalf("%+v, want RetryAfter 900ms, when the units of the former format leave", res)
	}
	if n := c.ZCard(ctx, key).Val(); n != 4 {
		t.Fatalf("%d members, want 3 rewritten and 1 new", n)
	}
}

// After a step back the sliding log's entries are no later than now and its
// TTL runs from the newest: the key never expires while an entry counts.
func TestSlidingLogTTLAfterStepBack(t *testing.T) {
	m := miniredis.RunT(t)
	m.SetTime(start.Add(time.Second))
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	l, err := algorithms.New(must(New(c, WithDenialCache(0), WithTimeout(time.Minute))), algorithms.SlidingWindowLog, algorithms.PerSecond(3))
	if err != nil {
		t.Fatal(err)
	}
	mustAllow(t, l, 1, true) // at T + 1s, a clock ahead
	m.SetTime(start)
	mustAllow(t, l, 1, true) // at T, corrected
	key := "rl:{k}:swl:3:1000000"
	for _, z := range c.ZRangeWithScores(ctx, key, 0, -1).Val() {
		if z.Score > float64(start.UnixMicro()) {
			t.Errorf("member %v at %d µs, after now %d", z.Member, int64(z.Score), start.UnixMicro())
		}
	}
	if n := c.ZCard(ctx, key).Val(); n != 2 {
		t.Errorf("%d members, want 2", n)
	}
	if ttl := c.PTTL(ctx, key).Val(); ttl != time.Second {
		t.Errorf("TTL %s, want a period from the newest entry, now", ttl)
	}
	mustAllow(t, l, 1, true)
	mustAllow(t, l, 1, false)
}
