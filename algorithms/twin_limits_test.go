package algorithms

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// With WithInstances a Redis store accepts exactly the limits a memory store
// accepts: limits whose shares round to one are merged in the local twin,
// which answers for the tighter of them, and a bucket whose share would
// refill too slowly gets a smaller burst rather than a refusal.
func TestInstancesTwinAcceptsWhatMemoryAccepts(t *testing.T) {
	year := 365 * 24 * time.Hour
	cases := []struct {
		name     string
		alg      Algorithm
		n        int
		limits   []Limit
		wantErr  bool    // refused by both stores
		twin     []Limit // the local twin's limits
		wantRule int     // Index of a local admission of cost 1 on a fresh key
	}{
		{"distinct", FixedWindow, 2, []Limit{PerSecond(10), PerMinute(100)}, false, []Limit{PerSecond(5), PerMinute(50)}, 0},
		{"10 and 11 per second", FixedWindow, 2, []Limit{PerSecond(10), PerSecond(11)}, false, []Limit{PerSecond(5)}, 0},
		{"the tighter given second", SlidingWindowCounter, 2, []Limit{PerSecond(11), PerSecond(10)}, false, []Limit{PerSecond(5)}, 1},
		{"both round up to 1", SlidingWindowLog, 4, []Limit{PerMinute(3), PerMinute(2)}, false, []Limit{PerMinute(1)}, 1},
		{"three into two", LeakyBucket, 2, []Limit{PerMinute(100), PerSecond(11), PerSecond(10)}, false, []Limit{PerMinute(50), PerSecond(5)}, 2},
		{"buckets of 20 and 21", TokenBucket, 2, []Limit{PerSecond(10).WithBurst(21), PerSecond(10).WithBurst(20)}, false, []Limit{PerSecond(5).WithBurst(10)}, 1},
		{"window ignores burst", FixedWindow, 2, []Limit{PerSecond(10).WithBurst(3), PerSecond(11)}, false, []Limit{PerSecond(5).WithBurst(1)}, 0},
		{"bucket refill within bound", TokenBucket, 2, []Limit{{Rate: 3, Period: year, Burst: 300}}, false, []Limit{{Rate: 1, Period: year, Burst: 100}}, 0},
		{"given twice", FixedWindow, 2, []Limit{PerSecond(10), PerSecond(10)}, true, nil, 0},
		{"window given twice by burst", SlidingWindowLog, 3, []Limit{PerSecond(10), PerSecond(10).WithBurst(4)}, true, nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, memErr := New(NewMemoryStore(), tc.alg, tc.limits...)
			clock := NewManualClock(start)
			l, err := New(NewRedisStore(redisClientNeverUsed(), WithInstances(tc.n), WithClock(clock.Now)), tc.alg, tc.limits...)
			if (memErr != nil) != tc.wantErr || (err != nil) != tc.wantErr {
				t.Fatalf("memory: %v, Redis: %v, want refused %v by both", memErr, err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			rl := l.(*redisLimiter)
			if !slices.Equal(rl.twin.limits, tc.twin) {
				t.Errorf("twin limits %v, want %v", rl.twin.limits, tc.twin)
			}
			// Nothing listens on the client's address: the twin decides.
			res, err := l.Allow(context.Background(), "k", 1)
			if err != nil || !res.Allowed || res.Decider != DecidedLocally || res.Index != tc.wantRule {
				t.Errorf("local admission %+v %v, want allowed locally for limit %d", res, err, tc.wantRule)
			}
		})
	}
}

// Over random pairs of limits, for every algorithm, a Redis store with
// WithInstances accepts what a memory store accepts.
func TestInstancesAcceptanceMatchesMemoryRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	periods := []time.Duration{time.Second, time.Minute, 365 * 24 * time.Hour, MaxPeriod}
	pick := func() Limit {
		l := Limit{Rate: 1 + rng.IntN(40), Period: periods[rng.IntN(len(periods))]}
		if rng.IntN(2) == 0 {
			l.Burst = rng.IntN(500)
		}
		return l
	}
	mem := NewMemoryStore()
	for range 3000 {
		alg, n := Algorithms[rng.IntN(len(Algorithms))], 1+rng.IntN(6)
		limits := []Limit{pick(), pick()}
		_, memErr := New(mem, alg, limits...)
		_, err := New(NewRedisStore(redisClientNeverUsed(), WithInstances(n)), alg, limits...)
		if (memErr == nil) != (err == nil) {
			t.Fatalf("%s %v with %d instances: memory %v, Redis %v", alg, limits, n, memErr, err)
		}
	}
}
