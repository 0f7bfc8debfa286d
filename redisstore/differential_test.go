package redisstore

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
	"github.com/redlimit/redlimit/memstore"
)

// Random sequences, microsecond by microsecond, on the memory store and on
// the Lua scripts (in miniredis): every Result must be identical, and every
// Result must keep the promises of the Result type. Deny-then-wait steps
// check that RetryAfter is exactly the wait a denied caller needs, and
// reset steps that after ResetAfter the whole quota is there again.

var differentialLimits = [][]algorithms.Limit{
	{algorithms.PerSecond(3)},
	{{Rate: 7, Period: time.Second, Burst: 10}},
	{{Rate: 5, Period: 250 * ms, Burst: 2}},
	{{Rate: 3, Period: 333_333 * time.Microsecond}},
	{algorithms.PerSecond(4), {Rate: 10, Period: 5 * time.Second, Burst: 6}},
	{{Rate: 100, Period: time.Minute}, {Rate: 2, Period: 100 * ms}},
	{algorithms.PerSecond(9), algorithms.PerSecond(8), algorithms.PerSecond(7), algorithms.PerSecond(6), {Rate: 5, Period: 2 * time.Second}, {Rate: 4, Period: 3 * time.Second}},
}

func TestDifferentialMemoryAndScripts(t *testing.T) {
	runEach(t, runDifferential, differentialLimits, 1, false)
}

// The server's clock can step back (a correction, a failover to a replica
// whose clock is behind) and jump ahead. Both stores must still agree and
// keep every promise: a RetryAfter or ResetAfter given after a step back
// is as true as any other, and a state a clock that was ahead left holds a
// key back at most a period (a refill) from now. Neither store drops state
// in this test: a key that Redis expired while the clock was ahead stays
// gone when it steps back, which the memory store does not mimic, and that
// is about expiry, not about the algorithms' arithmetic.
func TestDifferentialClockGoesBack(t *testing.T) {
	runEach(t, runDifferential, differentialLimits[:5], 100, true)
}

// runEach runs run for every algorithm on each of sets, in parallel
// subtests named algorithm/letter; set i's seed is seed+i.
func runEach(t *testing.T, run func(t *testing.T, alg algorithms.Algorithm, limits []algorithms.Limit, seed uint64, clockSteps bool),
	sets [][]algorithms.Limit, seed uint64, clockSteps bool) {
	for _, alg := range algorithms.All() {
		for li, limits := range sets {
			t.Run(string(alg)+"/"+string(rune('a'+li)), func(t *testing.T) {
				t.Parallel()
				run(t, alg, limits, uint64(li)+seed, clockSteps)
			})
		}
	}
}

// agree fails t unless the memory store (a, errA) and the scripts (b,
// errB) answered what at step alike, without an error, and with Remaining
// in [0, Limit]; it returns the answer.
func agree(t *testing.T, step int, what string, a, b algorithms.Result, errA, errB error) algorithms.Result {
	t.Helper()
	if errA != nil || errB != nil {
		t.Fatalf("step %d %s: errors memory %v, redis %v", step, what, errA, errB)
	}
	if a != b {
		t.Fatalf("step %d %s: stores disagree\n memory %+v\n redis  %+v", step, what, a, b)
	}
	if a.Remaining < 0 || a.Remaining > a.Limit {
		t.Fatalf("step %d %s: Remaining %d outside [0, %d]", step, what, a.Remaining, a.Limit)
	}
	return a
}

// wander moves the clock, on 4 steps in 10, ahead by up to a third of
// period (at most 30 days), and with clockSteps, on 2 in 10, back by up to
// a quarter of it.
func wander(rng *rand.Rand, advance func(time.Duration), period time.Duration, clockSteps bool) {
	switch r := rng.IntN(10); {
	case r < 4:
		advance(randMicros(rng, min(period/3, 30*24*time.Hour)))
	case r < 6 && clockSteps:
		advance(-randMicros(rng, period/4))
	}
}

// randMicros is a random duration in [0, d), in whole microseconds.
func randMicros(rng *rand.Rand, d time.Duration) time.Duration {
	return time.Duration(rng.Int64N(int64(d))) / time.Microsecond * time.Microsecond
}

// diffPair is one limiter on the memory store and the same on the scripts
// (miniredis), both on one clock the test moves.
type diffPair struct {
	mem, red algorithms.RateLimiter
	clock    func() time.Time
	advance  func(d time.Duration)
	maxCost  int // the most a request may cost under every limit
}

// newDiffPair starts the pair at start, the memory store sweeping every
// sweep. With clockSteps the clock may go back, so miniredis's keys do not
// expire as time passes (their TTLs would move with a clock that steps).
func newDiffPair(t *testing.T, alg algorithms.Algorithm, limits []algorithms.Limit, clockSteps bool, sweep time.Duration) *diffPair {
	t.Helper()
	m := miniredis.RunT(t)
	m.SetTime(start)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	var mu sync.Mutex
	now := start
	p := &diffPair{clock: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
	var err error
	if p.mem, err = algorithms.New(must(memstore.New(memstore.WithClock(p.clock), memstore.WithSweepInterval(sweep))), alg, limits...); err != nil {
		t.Fatal(err)
	}
	// No denial cache, and a deadline a loaded machine does not reach: this
	// compares the scripts, not the stand-ins for when Redis is late.
	if p.red, err = algorithms.New(must(New(c, WithDenialCache(0), WithTimeout(time.Minute))), alg, limits...); err != nil {
		t.Fatal(err)
	}
	p.maxCost = ratemath.QuotaOf(alg, limits[0])
	for _, l := range limits {
		p.maxCost = min(p.maxCost, ratemath.QuotaOf(alg, l))
	}
	p.advance = func(d time.Duration) {
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
		m.SetTime(now)
		if !clockSteps {
			m.FastForward(d)
		}
	}
	return p
}

// sweepFor is the memory store's sweep interval in a differential test: a
// minute, or, when the clock steps, long enough that no state is dropped
// while the clock is ahead.
func sweepFor(clockSteps bool) time.Duration {
	if clockSteps {
		return 150 * 365 * 24 * time.Hour
	}
	return time.Minute
}

func runDifferential(t *testing.T, alg algorithms.Algorithm, limits []algorithms.Limit, seed uint64, clockBack bool) {
	p := newDiffPair(t, alg, limits, clockBack, sweepFor(clockBack))
	mem, red, advance, maxCost := p.mem, p.red, p.advance, p.maxCost
	// The limits are exact while the clock and the times a bucket reaches
	// stay within 2^53 µs (the year 2255): a bucket refills within
	// MaxRefill, so until the year 2155. Waits of decades keep the test's
	// clock within 50 years of start.
	tooFar := func(d time.Duration) bool {
		return p.clock().Add(d).Sub(start) > 50*365*24*time.Hour
	}
	ctx := context.Background()
	both := func(step int, key string, cost int) algorithms.Result {
		t.Helper()
		a, err := mem.Allow(ctx, key, cost)
		if err != nil {
			t.Fatalf("step %d: memory: %v", step, err)
		}
		b, err := red.Allow(ctx, key, cost)
		if err != nil {
			t.Fatalf("step %d: redis: %v", step, err)
		}
		if a != b {
			t.Fatalf("step %d (key %s, cost %d): stores disagree\n memory %+v\n redis  %+v", step, key, cost, a, b)
		}
		checkInvariants(t, step, a, alg, limits)
		return a
	}
	rng := rand.New(rand.NewPCG(seed, uint64(len(alg))))
	keys := []string{"x", "y", "z"}
	for step := range stepsOf(300) {
		switch r := rng.IntN(10); {
		case r < 4:
			advance(randMicros(rng, min(limits[0].Period/4, 30*24*time.Hour)))
		case r < 5:
			advance(0) // same microsecond
		case r < 6 && clockBack:
			advance(-randMicros(rng, limits[0].Period/8))
		case r < 7 && clockBack:
			// A clock ahead by up to two periods, corrected after a request.
			jump := randMicros(rng, 2*limits[0].Period)
			advance(jump)
			both(step, keys[rng.IntN(len(keys))], 1+rng.IntN(maxCost))
			advance(-jump)
		}
		key := keys[rng.IntN(len(keys))]
		cost := 1 + rng.IntN(maxCost)
		res := both(step, key, cost)
		if res.Allowed || rng.IntN(3) != 0 || tooFar(res.RetryAfter+res.ResetAfter) {
			continue
		}
		checkWait(t, step, advance, both, key, cost, res, len(limits) == 1 && rng.IntN(2) == 0)
	}
}

// checkWait holds res, the denial of a request of cost for key, to its
// RetryAfter: waiting one microsecond less is not enough (and a denied
// request consumes nothing, so asking again changes nothing); waiting
// exactly RetryAfter is. With whole (a single limit), after the ResetAfter
// of a request of cost 1 the whole quota is back. both decides a request
// on every store under test.
func checkWait(t *testing.T, step int, advance func(time.Duration), both func(step int, key string, cost int) algorithms.Result,
	key string, cost int, res algorithms.Result, whole bool) {
	t.Helper()
	if res.RetryAfter > time.Microsecond {
		advance(res.RetryAfter - time.Microsecond)
		if again := both(step, key, cost); again.Allowed {
			t.Fatalf("step %d: allowed 1µs before RetryAfter %s: %+v", step, res.RetryAfter, again)
		}
		advance(time.Microsecond)
	} else {
		advance(res.RetryAfter)
	}
	if again := both(step, key, cost); !again.Allowed {
		t.Fatalf("step %d: denied after waiting RetryAfter %s: %+v", step, res.RetryAfter, again)
	}
	if whole {
		again := both(step, key, 1)
		advance(again.ResetAfter)
		full := both(step, key, again.Limit)
		if !full.Allowed || full.Remaining != 0 {
			t.Fatalf("step %d: after ResetAfter %s the whole quota %d did not pass: %+v", step, again.ResetAfter, again.Limit, full)
		}
	}
}

// checkInvariants holds every Result to the promises of its fields.
func checkInvariants(t *testing.T, step int, r algorithms.Result, alg algorithms.Algorithm, limits []algorithms.Limit) {
	t.Helper()
	// A bucket whose time unit is coarser than 1µs is full again at the
	// start of a unit: up to a unit after its refill time.
	var period, unit time.Duration
	for _, l := range limits {
		if ratemath.WindowOf(alg, l) == r.Period && ratemath.QuotaOf(alg, l) == r.Limit {
			period = l.Period
			if r.ResetAfter > r.Period {
				unit = time.Duration(ratemath.ParamsFor(alg, l).Unit-1) * time.Microsecond
			}
		}
	}
	switch {
	case period == 0:
		t.Fatalf("step %d: Limit %d per %s is none of the limits", step, r.Limit, r.Period)
	case r.Remaining < 0 || r.Remaining > r.Limit:
		t.Fatalf("step %d: Remaining %d outside [0, %d]", step, r.Remaining, r.Limit)
	case r.Allowed && r.RetryAfter != 0:
		t.Fatalf("step %d: allowed with RetryAfter %s", step, r.RetryAfter)
	case !r.Allowed && r.RetryAfter <= 0:
		t.Fatalf("step %d: denied with RetryAfter %s", step, r.RetryAfter)
	case r.ResetAfter < 0 || r.ResetAfter > max(2*period, r.Period+unit):
		t.Fatalf("step %d: ResetAfter %s outside [0, max(2×%s, %s + %s)]", step, r.ResetAfter, period, r.Period, unit)
	case r.Allowed && r.ResetAfter == 0:
		t.Fatalf("step %d: allowed with ResetAfter 0", step)
	}
}
