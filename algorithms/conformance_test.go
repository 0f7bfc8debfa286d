package algorithms

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
)

// The conformance suite: one table of scripted sequences, run against every
// store. Steps keep at least 50ms from any boundary, so the same table runs
// on a real Redis server in real time, where durations are compared within
// realTolerance; on the memory store and miniredis the clock is set
// exactly and every field must match exactly.

const ms = time.Millisecond

// realTolerance bounds how far a real-time backend's durations may stray:
// the sleep before a step and the round trip add a little to each step.
const realTolerance = 40 * ms

type limiterSpec struct {
	alg    Algorithm
	limits []Limit
}

type step struct {
	at      time.Duration // from the start of the sequence
	limiter int           // index into sequence.limiters
	key     string        // "" means "a"
	cost    int           // 0 means 1
	want    Result
}

type sequence struct {
	name     string
	limiters []limiterSpec
	steps    []step
}

func pass(limit, remaining int, reset, period time.Duration) Result {
	return Result{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset, Period: period}
}

func deny(limit, remaining int, retry, reset, period time.Duration) Result {
	return Result{Allowed: false, Limit: limit, Remaining: remaining, RetryAfter: retry, ResetAfter: reset, Period: period}
}

// bound sets which of several limits binds r.
func bound(index int, r Result) Result { r.Index = index; return r }

func one(alg Algorithm, limits ...Limit) []limiterSpec {
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
		limiters: one(FixedWindow, PerSecond(3)),
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
		limiters: one(FixedWindow, PerSecond(5)),
		steps: []step{
			{at: 0, cost: 4, want: pass(5, 1, 1000*ms, time.Second)},
			{at: 400 * ms, cost: 2, want: deny(5, 1, 600*ms, 600*ms, time.Second)},
			{at: 500 * ms, cost: 1, want: pass(5, 0, 500*ms, time.Second)},
		},
	},
	{
		name:     "sliding window log",
		limiters: one(SlidingWindowLog, PerSecond(3)),
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
		limiters: one(SlidingWindowLog, PerSecond(3)),
		steps: []step{
			{at: 0, want: pass(3, 2, 1000*ms, time.Second)},
			{at: 0, want: pass(3, 1, 1000*ms, time.Second)},
			{at: 0, want: pass(3, 0, 1000*ms, time.Second)},
			{at: 0, want: deny(3, 0, 1000*ms, 1000*ms, time.Second)},
		},
	},
	{
		name:     "sliding window counter",
		limiters: one(SlidingWindowCounter, PerSecond(4)),
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
		limiters: one(TokenBucket, Limit{Rate: 4, Period: time.Second, Burst: 2}),
		steps:    bucketSteps,
	},
	{
		name:     "leaky bucket",
		limiters: one(LeakyBucket, Limit{Rate: 4, Period: time.Second, Burst: 2}),
		steps:    bucketSteps,
	},
	{
		name:     "token bucket defaults burst to rate",
		limiters: one(TokenBucket, PerSecond(2)),
		steps: []step{
			{at: 0, cost: 2, want: pass(2, 0, 1000*ms, time.Second)},
			{at: 100 * ms, want: deny(2, 0, 400*ms, 900*ms, time.Second)},
			{at: 600 * ms, want: pass(2, 0, 900*ms, time.Second)},
		},
	},
	{
		name: "several limits decide together",
		limiters: []limiterSpec{
			{FixedWindow, []Limit{PerSecond(2), {Rate: 3, Period: 10 * time.Second}}},
			{FixedWindow, []Limit{PerSecond(2)}}, // shares the per-second state
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
			{FixedWindow, []Limit{PerSecond(1)}},
			{SlidingWindowLog, []Limit{PerSecond(1)}},
			{FixedWindow, []Limit{PerSecond(2)}},
			{FixedWindow, []Limit{{Rate: 1, Period: 2 * time.Second}}},
			{TokenBucket, []Limit{{Rate: 1, Period: time.Second, Burst: 1}}},
			{TokenBucket, []Limit{{Rate: 1, Period: time.Second, Burst: 2}}},
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

// backend runs sequences on one kind of store.
type backend struct {
	name string
	// newStore returns a store for one run of a sequence, a function that
	// waits or moves the clock to start+at, and the tolerance for durations.
	newStore func(t *testing.T) (Store, func(at time.Duration), time.Duration)
	// realTime backends run in real time, where a loaded machine can make a
	// step late; such a run proves nothing and is run again.
	realTime bool
}

// start is a fixed, whole-second instant for the fake clocks.
var start = time.Unix(1_800_000_000, 0)

var memoryBackend = backend{name: "memory", newStore: func(t *testing.T) (Store, func(time.Duration), time.Duration) {
	var mu sync.Mutex
	now := start
	store := NewMemoryStore(WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	return store, func(at time.Duration) { mu.Lock(); now = start.Add(at); mu.Unlock() }, 0
}}

var miniredisBackend = backend{name: "miniredis", newStore: func(t *testing.T) (Store, func(time.Duration), time.Duration) {
	m := miniredis.RunT(t)
	m.SetTime(start)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	var last time.Duration
	// The denial cache is off, and the deadline out of reach of a loaded
	// machine: these sequences test the scripts.
	return NewRedisStore(c, WithDenialCache(0), WithTimeout(time.Minute)), func(at time.Duration) {
		// TIME follows SetTime; key expiry follows FastForward: move both.
		m.SetTime(start.Add(at))
		m.FastForward(at - last)
		last = at
	}, 0
}}

var prefixes atomic.Int64

// realBackend runs on a real server in real time: each run of a sequence
// gets its own prefix and starts when it is set up.
func realBackend(name string, client func(t *testing.T) redis.UniversalClient) backend {
	return backend{name: name, realTime: true, newStore: func(t *testing.T) (Store, func(time.Duration), time.Duration) {
		c := client(t)
		// The first command of a client dials (and a cluster client learns
		// the slots); do that before the clock starts.
		if err := c.Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		begin := time.Now().Add(20 * ms)
		prefix := fmt.Sprintf("conf%d", prefixes.Add(1))
		return NewRedisStore(c, WithPrefix(prefix), WithDenialCache(0)), func(at time.Duration) {
			time.Sleep(time.Until(begin.Add(at)))
		}, realTolerance
	}}
}

// maxLateness is how late a real-time step may complete and still count:
// the steps keep 50ms from every boundary and durations are compared
// within realTolerance.
const maxLateness = 30 * ms

// runSequence runs seq once and returns its mismatches, and whether a step
// completed later than maxLateness (only on real-time backends).
func runSequence(t *testing.T, b backend, seq sequence) (mismatches []string, late bool) {
	store, moveTo, tol := b.newStore(t)
	limiters := make([]Limiter, len(seq.limiters))
	for i, spec := range seq.limiters {
		l, err := New(store, spec.alg, spec.limits...)
		if err != nil {
			t.Fatalf("New(%s, %v): %v", spec.alg, spec.limits, err)
		}
		limiters[i] = l
	}
	ctx := context.Background()
	var first time.Time
	for i, s := range seq.steps {
		moveTo(s.at)
		if i == 0 {
			first = time.Now()
		}
		key, cost := s.key, s.cost
		if key == "" {
			key = "a"
		}
		if cost == 0 {
			cost = 1
		}
		got, err := limiters[s.limiter].Allow(ctx, key, cost)
		if err != nil {
			t.Fatalf("step %d (at %s): %v", i, s.at, err)
		}
		if b.realTime && time.Since(first)-s.at > maxLateness {
			late = true
		}
		if msg := compareResult(got, s.want, tol); msg != "" {
			mismatches = append(mismatches, fmt.Sprintf("step %d (at %s, limiter %d, key %q, cost %d): %s\n got  %+v\n want %+v",
				i, s.at, s.limiter, key, cost, msg, got, s.want))
		}
	}
	return mismatches, late
}

// compareResult returns what differs between got and want, durations
// within tol.
func compareResult(got, want Result, tol time.Duration) string {
	var diffs []string
	if got.Allowed != want.Allowed {
		diffs = append(diffs, "Allowed")
	}
	if got.Limit != want.Limit {
		diffs = append(diffs, "Limit")
	}
	if got.Remaining != want.Remaining {
		diffs = append(diffs, "Remaining")
	}
	if got.Period != want.Period {
		diffs = append(diffs, "Period")
	}
	if got.Index != want.Index {
		diffs = append(diffs, "Index")
	}
	near := func(a, b time.Duration) bool { d := a - b; return d <= tol && d >= -tol }
	if !near(got.RetryAfter, want.RetryAfter) || (got.RetryAfter == 0) != (want.RetryAfter == 0) {
		diffs = append(diffs, "RetryAfter")
	}
	if !near(got.ResetAfter, want.ResetAfter) {
		diffs = append(diffs, "ResetAfter")
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprintf("%s differ (tolerance %s)", strings.Join(diffs, ", "), tol)
}

func runConformance(t *testing.T, b backend) {
	for _, seq := range sequences {
		t.Run(seq.name, func(t *testing.T) {
			t.Parallel()
			// A real-time run with a late step is set aside and run again;
			// a run on time must match.
			const attempts = 5
			for attempt := 1; ; attempt++ {
				mismatches, late := runSequence(t, b, seq)
				if !late {
					for _, m := range mismatches {
						t.Error(m)
					}
					return
				}
				if attempt == attempts {
					t.Fatalf("every one of %d runs had a step more than %s late: the machine is too loaded to time this sequence", attempts, maxLateness)
				}
				t.Logf("run %d had a late step (%d mismatches); running again", attempt, len(mismatches))
			}
		})
	}
}

func TestConformanceMemory(t *testing.T)    { runConformance(t, memoryBackend) }
func TestConformanceMiniredis(t *testing.T) { runConformance(t, miniredisBackend) }

func TestConformanceRedis(t *testing.T) {
	addr := redistest.Standalone(t)
	runConformance(t, realBackend("redis", func(t *testing.T) redis.UniversalClient {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		return c
	}))
}

func TestConformanceCluster(t *testing.T) {
	addrs := redistest.Cluster(t)
	runConformance(t, realBackend("cluster", func(t *testing.T) redis.UniversalClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		t.Cleanup(func() { c.Close() })
		return c
	}))
}
