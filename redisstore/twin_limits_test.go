package redisstore

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/memstore"
)

// With WithInstances a Redis store accepts exactly the limits a memory store
// accepts: limits whose shares round to one are merged in the local twin,
// which answers for the tighter of them, and a bucket whose share would
// refill too slowly gets a smaller burst rather than a refusal.
func TestInstancesTwinAcceptsWhatMemoryAccepts(t *testing.T) {
	year := 365 * 24 * time.Hour
	cases := []struct {
		name     string
		alg      algorithms.Algorithm
		n        int
		limits   []algorithms.Limit
		wantErr  bool               // refused by both stores
		twin     []algorithms.Limit // the local twin's limits
		wantRule int                // Index of a local admission of cost 1 on a fresh key
	}{
		{"distinct", algorithms.FixedWindow, 2, []algorithms.Limit{algorithms.PerSecond(10), algorithms.PerMinute(100)}, false, []algorithms.Limit{algorithms.PerSecond(5), algorithms.PerMinute(50)}, 0},
		{"10 and 11 per second", algorithms.FixedWindow, 2, []algorithms.Limit{algorithms.PerSecond(10), algorithms.PerSecond(11)}, false, []algorithms.Limit{algorithms.PerSecond(5)}, 0},
		{"the tighter given second", algorithms.SlidingWindowCounter, 2, []algorithms.Limit{algorithms.PerSecond(11), algorithms.PerSecond(10)}, false, []algorithms.Limit{algorithms.PerSecond(5)}, 1},
		{"both round up to 1", algorithms.SlidingWindowLog, 4, []algorithms.Limit{algorithms.PerMinute(3), algorithms.PerMinute(2)}, false, []algorithms.Limit{algorithms.PerMinute(1)}, 1},
		{"three into two", algorithms.LeakyBucket, 2, []algorithms.Limit{algorithms.PerMinute(100), algorithms.PerSecond(11), algorithms.PerSecond(10)}, false, []algorithms.Limit{algorithms.PerMinute(50), algorithms.PerSecond(5)}, 2},
		{"buckets of 20 and 21", algorithms.TokenBucket, 2, []algorithms.Limit{algorithms.PerSecond(10).WithBurst(21), algorithms.PerSecond(10).WithBurst(20)}, false, []algorithms.Limit{algorithms.PerSecond(5).WithBurst(10)}, 1},
		{"window ignores burst", algorithms.FixedWindow, 2, []algorithms.Limit{algorithms.PerSecond(10).WithBurst(3), algorithms.PerSecond(11)}, false, []algorithms.Limit{algorithms.PerSecond(5).WithBurst(1)}, 0},
		{"bucket refill within bound", algorithms.TokenBucket, 2, []algorithms.Limit{{Rate: 3, Period: year, Burst: 300}}, false, []algorithms.Limit{{Rate: 1, Period: year, Burst: 100}}, 0},
		{"given twice", algorithms.FixedWindow, 2, []algorithms.Limit{algorithms.PerSecond(10), algorithms.PerSecond(10)}, true, nil, 0},
		{"window given twice by burst", algorithms.SlidingWindowLog, 3, []algorithms.Limit{algorithms.PerSecond(10), algorithms.PerSecond(10).WithBurst(4)}, true, nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, memErr := algorithms.New(must(memstore.New()), tc.alg, tc.limits...)
			clock := storetest.NewManualClock(start)
			l, err := algorithms.New(storeNeverUsed(t, WithInstances(tc.n), WithClock(clock.Now)), tc.alg, tc.limits...)
			if (memErr != nil) != tc.wantErr || (err != nil) != tc.wantErr {
				t.Fatalf("memory: %v, Redis: %v, want refused %v by both", memErr, err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			rl := l.(*redisLimiter)
			if !slices.Equal(rl.twinLimits, tc.twin) {
				t.Errorf("twin limits %v, want %v", rl.twinLimits, tc.twin)
			}
			// Nothing listens on the client's address: the twin decides.
			res, err := l.Allow(context.Background(), "k", 1)
			if err != nil || !res.Allowed || res.Decider != algorithms.DecidedLocally || res.Index != tc.wantRule {
				t.Errorf("local admission %+v %v, want allowed locally for limit %d", res, err, tc.wantRule)
			}
		})
	}
}

// Over random pairs of limits, for every algorithm, a Redis store with
// WithInstances accepts what a memory store accepts.
func TestInstancesAcceptanceMatchesMemoryRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	periods := []time.Duration{time.Second, time.Minute, 365 * 24 * time.Hour, algorithms.MaxPeriod}
	pick := func() algorithms.Limit {
		l := algorithms.Limit{Rate: 1 + rng.IntN(40), Period: periods[rng.IntN(len(periods))]}
		if rng.IntN(2) == 0 {
			l.Burst = rng.IntN(500)
		}
		return l
	}
	mem := must(memstore.New())
	c := redisClientNeverUsed()
	defer c.Close()
	stores := map[int]*Store{} // per n: one store's limiters, never used, hold nothing of Redis
	defer func() {
		for _, st := range stores {
			_ = st.Close(closeCtx())
		}
	}()
	for range 3000 {
		alg, n := algorithms.All()[rng.IntN(len(algorithms.All()))], 1+rng.IntN(6)
		limits := []algorithms.Limit{pick(), pick()}
		_, memErr := algorithms.New(mem, alg, limits...)
		st := stores[n]
		if st == nil {
			st = must(New(c, WithInstances(n), WithEvictionAllowed())) // no wait for a policy nobody can read
			stores[n] = st
		}
		_, err := algorithms.New(st, alg, limits...)
		if (memErr == nil) != (err == nil) {
			t.Fatalf("%s %v with %d instances: memory %v, Redis %v", alg, limits, n, memErr, err)
		}
	}
}
