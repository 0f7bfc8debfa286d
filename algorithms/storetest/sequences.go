package storetest

import (
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// The sequences: one table of scripted requests, run against every store.
// Steps keep at least 50ms from any boundary, so the same table runs in real
// time (Run), where durations are compared within realTolerance; on a store
// whose clock the test sets (RunClocked) every field must match exactly.

const ms = time.Millisecond

type limiterSpec struct {
	alg    algorithms.Algorithm
	limits []algorithms.Limit
}

type step struct {
	at      time.Duration // from the start of the sequence
	limiter int           // index into sequence.limiters
	key     string        // "" means "a"
	cost    int           // 0 means 1
	want    algorithms.Result
}

type sequence struct {
	name     string
	limiters []limiterSpec
	steps    []step
}

func pass(limit, remaining int, reset, period time.Duration) algorithms.Result {
	return algorithms.Result{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset, Period: period}
}

func deny(limit, remaining int, retry, reset, period time.Duration) algorithms.Result {
	return algorithms.Result{Allowed: false, Limit: limit, Remaining: remaining, RetryAfter: retry, ResetAfter: reset, Period: period}
}

// bound sets which of several limits binds r.
func bound(index int, r algorithms.Result) algorithms.Result { r.Index = index; return r }

func one(alg algorithms.Algorithm, limits ...algorithms.Limit) []limiterSpec {
	return []limiterSpec{{alg, limits}}
}

// bucketSteps hold for both bucket algorithms, which are one model stored
// two ways: capacity 2, refilled at 4 per second (one unit per 250ms).
var bucketSteps = []step{
	{at: 0, want: pass(2, 1, 250*ms, 500*ms)},
	{at: 10 * ms, want: pass(2, 0, 490*ms, 500*ms)},
	{at: 20 * ms, want: deny(2, 0, 230*ms, 480*ms, 500*ms)},
	{at: 300 * ms, want: pass(2, 0, 450*ms, 500*ms)},
	{at: 1000 * ms, cost: 2, want: pass(2, 0, 500*ms, 500*ms)},
	{at: 1100 * ms, want: deny(2, 0, 150*ms, 400*ms, 500*ms)},
	{at: 1100 * ms, key: "b", cost: 2, want: pass(2, 0, 500*ms, 500*ms)},
}

var sequences = []sequence{
	{
		name:     "fixed window",
		limiters: one(algorithms.FixedWindow, algorithms.PerSecond(3)),
		steps: []step{
			{at: 0, want: pass(3, 2, 1000*ms, time.Second)},
			{at: 100 * ms, want: pass(3, 1, 900*ms, time.Second)},
			{at: 200 * ms, want: pass(3, 0, 800*ms, time.Second)},
			{at: 300 * ms, want: deny(3, 0, 700*ms, 700*ms, time.Second)},
			{at: 300 * ms, key: "b", want: pass(3, 2, 1000*ms, time.Second)},
			{at: 1100 * ms, want: pass(3, 2, 1000*ms, time.Second)},
			{at: 1200 * ms, cost: 2, want: pass(3, 0, 900*ms, time.Second)},
			{at: 1300 * ms, want: deny(3, 0, 800*ms, 800*ms, time.Second)},
		},
	},
	{
		name:     "fixed window cost",
		limiters: one(algorithms.FixedWindow, algorithms.PerSecond(5)),
		steps: []step{
			{at: 0, cost: 4, want: pass(5, 1, 1000*ms, time.Second)},
			{at: 400 * ms, cost: 2, want: deny(5, 1, 600*ms, 600*ms, time.Second)},
			{at: 500 * ms, cost: 1, want: pass(5, 0, 500*ms, time.Second)},
		},
	},
	{
		name:     "sliding window log",
		limiters: one(algorithms.SlidingWindowLog, algorithms.PerSecond(3)),
		steps: []step{
			{at: 0, want: pass(3, 2, 1000*ms, time.Second)},
			{at: 300 * ms, want: pass(3, 1, 1000*ms, time.Second)},
			{at: 600 * ms, want: pass(3, 0, 1000*ms, time.Second)},
			{at: 700 * ms, want: deny(3, 0, 300*ms, 900*ms, time.Second)},
			{at: 1100 * ms, want: pass(3, 0, 1000*ms, time.Second)},
			{at: 1200 * ms, cost: 2, want: deny(3, 0, 400*ms, 900*ms, time.Second)},
			{at: 1650 * ms, cost: 2, want: pass(3, 0, 1000*ms, time.Second)},
		},
	},
	{
		name:     "sliding window log at one instant",
		limiters: one(algorithms.SlidingWindowLog, algorithms.PerSecond(3)),
		steps: []step{
			{at: 0, want: pass(3, 2, 1000*ms, time.Second)},
			{at: 0, want: pass(3, 1, 1000*ms, time.Second)},
			{at: 0, want: pass(3, 0, 1000*ms, time.Second)},
			{at: 0, want: deny(3, 0, 1000*ms, 1000*ms, time.Second)},
		},
	},
	{
		name:     "sliding window counter",
		limiters: one(algorithms.SlidingWindowCounter, algorithms.PerSecond(4)),
		steps: []step{
			{at: 0, want: pass(4, 3, 2000*ms, time.Second)},
			{at: 100 * ms, want: pass(4, 2, 1900*ms, time.Second)},
			{at: 200 * ms, want: pass(4, 1, 1800*ms, time.Second)},
			{at: 300 * ms, want: pass(4, 0, 1700*ms, time.Second)},
			// The next window must start before the weighted 4 leaves room.
			{at: 400 * ms, want: deny(4, 0, 850*ms, 1600*ms, time.Second)},
			// Window 2: ceil(4 × 0.65) = 3 of the previous window still count.
			{at: 1350 * ms, want: pass(4, 0, 1650*ms, time.Second)},
			// 1 + ceil(4 × 0.6) = 4: wait until the weight drops to 2, at 1500ms.
			{at: 1400 * ms, want: deny(4, 0, 100*ms, 1600*ms, time.Second)},
			{at: 1600 * ms, want: pass(4, 0, 1400*ms, time.Second)},
			// Two whole periods later the key starts afresh.
			{at: 3200 * ms, want: pass(4, 3, 2000*ms, time.Second)},
		},
	},
	{
		name:     "token bucket",
		limiters: one(algorithms.TokenBucket, algorithms.Limit{Rate: 4, Period: time.Second, Burst: 2}),
		steps:    bucketSteps,
	},
	{
		name:     "leaky bucket",
		limiters: one(algorithms.LeakyBucket, algorithms.Limit{Rate: 4, Period: time.Second, Burst: 2}),
		steps:    bucketSteps,
	},
	{
		name:     "token bucket defaults burst to rate",
		limiters: one(algorithms.TokenBucket, algorithms.PerSecond(2)),
		steps: []step{
			{at: 0, cost: 2, want: pass(2, 0, 1000*ms, time.Second)},
			{at: 100 * ms, want: deny(2, 0, 400*ms, 900*ms, time.Second)},
			{at: 600 * ms, want: pass(2, 0, 900*ms, time.Second)},
		},
	},
	{
		name: "several limits decide together",
		limiters: []limiterSpec{
			{algorithms.FixedWindow, []algorithms.Limit{algorithms.PerSecond(2), {Rate: 3, Period: 10 * time.Second}}},
			{algorithms.FixedWindow, []algorithms.Limit{algorithms.PerSecond(2)}}, // shares the per-second state
		},
		steps: []step{
			{at: 0, want: pass(2, 1, 1000*ms, time.Second)},
			{at: 100 * ms, want: pass(2, 0, 900*ms, time.Second)},
			{at: 200 * ms, want: deny(2, 0, 800*ms, 800*ms, time.Second)},
			{at: 1100 * ms, want: bound(1, pass(3, 0, 8900*ms, 10*time.Second))},
			// The 10s limit denies; the per-second limit, which allowed, must
			// not have consumed: the second limiter still finds room for one.
			{at: 1200 * ms, want: bound(1, deny(3, 0, 8800*ms, 8800*ms, 10*time.Second))},
			{at: 1300 * ms, limiter: 1, want: pass(2, 0, 800*ms, time.Second)},
			{at: 1400 * ms, limiter: 1, want: deny(2, 0, 700*ms, 700*ms, time.Second)},
		},
	},
	{
		name: "limiters that differ never share state",
		limiters: []limiterSpec{
			{algorithms.FixedWindow, []algorithms.Limit{algorithms.PerSecond(1)}},
			{algorithms.SlidingWindowLog, []algorithms.Limit{algorithms.PerSecond(1)}},
			{algorithms.FixedWindow, []algorithms.Limit{algorithms.PerSecond(2)}},
			{algorithms.FixedWindow, []algorithms.Limit{{Rate: 1, Period: 2 * time.Second}}},
			{algorithms.TokenBucket, []algorithms.Limit{{Rate: 1, Period: time.Second, Burst: 1}}},
			{algorithms.TokenBucket, []algorithms.Limit{{Rate: 1, Period: time.Second, Burst: 2}}},
		},
		steps: []step{
			{at: 0, limiter: 0, want: pass(1, 0, 1000*ms, time.Second)},
			{at: 0, limiter: 1, want: pass(1, 0, 1000*ms, time.Second)},
			{at: 0, limiter: 2, want: pass(2, 1, 1000*ms, time.Second)},
			{at: 0, limiter: 3, want: pass(1, 0, 2000*ms, 2*time.Second)},
			{at: 0, limiter: 4, want: pass(1, 0, 1000*ms, time.Second)},
			{at: 0, limiter: 5, want: pass(2, 1, 1000*ms, 2*time.Second)},
			{at: 100 * ms, limiter: 0, want: deny(1, 0, 900*ms, 900*ms, time.Second)},
		},
	},
}
