package redisstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memstore"
)

// Random sequences of requests and refunds on the memory store and on the
// scripts (in miniredis): every Result must be identical, a refund never
// leaves Remaining above the quota, and a refund of units taken at most
// age ago, after the allowed requests' units, leaves exactly the Remaining
// the same requests without them would have had, when nothing else ran.
func TestDifferentialRefunds(t *testing.T) {
	runEach(t, runRefundDifferential, differentialLimits, 7, false)
}

// The same with a server clock that steps back and forth: the corrections
// a refund makes agree too.
func TestDifferentialRefundsClockSteps(t *testing.T) {
	runEach(t, runRefundDifferential, differentialLimits[:5], 70, true)
}

func runRefundDifferential(t *testing.T, alg algorithms.Algorithm, limits []algorithms.Limit, seed uint64, clockSteps bool) {
	p := newDiffPair(t, alg, limits, clockSteps, sweepFor(clockSteps))
	mem, red, clock, advance, maxCost := p.mem, p.red, p.clock, p.advance, p.maxCost
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, uint64(len(alg))))
	keys := []string{"x", "y"}
	var taken []time.Time // when requests were allowed, any key
	for step := range stepsOf(400) {
		wander(rng, advance, limits[0].Period, clockSteps)
		key := keys[rng.IntN(len(keys))]
		cost := 1 + rng.IntN(maxCost)
		if rng.IntN(3) == 0 {
			// A refund as old as some earlier admission, or of any age;
			// sometimes more than the quota.
			var age time.Duration
			if len(taken) > 0 && rng.IntN(4) != 0 {
				age = max(clock().Sub(taken[rng.IntN(len(taken))]), 0)
			} else {
				age = time.Duration(rng.Int64N(int64(2 * limits[0].Period)))
			}
			if rng.IntN(5) == 0 {
				cost = 3 * maxCost
			}
			a, errA := mem.Refund(ctx, key, cost, age)
			b, errB := red.Refund(ctx, key, cost, age)
			agree(t, step, "refund", a, b, errA, errB)
			continue
		}
		if (alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket) && rng.IntN(3) == 0 {
			// A reservation, which may leave a debt or a backlog past the
			// capacity for a refund to meet.
			maxDelay := randMicros(rng, limits[0].Period)
			a, errA := mem.Reserve(ctx, key, cost, maxDelay)
			b, errB := red.Reserve(ctx, key, cost, maxDelay)
			if agree(t, step, "reserve", a, b, errA, errB).Allowed {
				taken = append(taken, clock())
			}
			continue
		}
		a, errA := mem.Allow(ctx, key, cost)
		b, errB := red.Allow(ctx, key, cost)
		if agree(t, step, "allow", a, b, errA, errB).Allowed {
			taken = append(taken, clock())
		}
	}
}

// A reservation refunded at once leaves exactly the state before it, on
// every algorithm, and refunding more than was taken leaves the quota whole
// and no more.
func TestRefundRestoresAndCaps(t *testing.T) {
	ctx := context.Background()
	stores := testStores(t) // one set for every algorithm: the keys differ
	for _, alg := range algorithms.All() {
		for _, store := range stores {
			t.Run(string(alg)+"/"+store.name, func(t *testing.T) {
				l, err := algorithms.New(store.store, alg, algorithms.PerMinute(10))
				if err != nil {
					t.Fatal(err)
				}
				key := t.Name()
				if _, err := l.Allow(ctx, key, 3); err != nil {
					t.Fatal(err)
				}
				before, err := l.Peek(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if r, err := l.Allow(ctx, key, 4); err != nil || !r.Allowed || r.Remaining != 3 {
					t.Fatalf("reserve 4: %+v, %v", r, err)
				}
				reserved := time.Now()
				r, err := l.Refund(ctx, key, 4, time.Since(reserved))
				if err != nil {
					t.Fatal(err)
				}
				// Peek answers for a request of 1: Remaining after it.
				if r.Remaining != before.Remaining+1 || !r.Allowed {
					t.Fatalf("after refund of 4: %+v, before it %+v", r, before)
				}
				r, err = l.Refund(ctx, key, 100, 0)
				if err != nil {
					t.Fatal(err)
				}
				if r.Remaining != 10 {
					t.Fatalf("refund of more than taken: Remaining %d, want the quota 10", r.Remaining)
				}
				// The quota is whole, and no more: 10 pass, the 11th does not.
				for i := range 11 {
					res, err := l.Allow(ctx, key, 1)
					if err != nil {
						t.Fatal(err)
					}
					if res.Allowed != (i < 10) {
						t.Fatalf("request %d after refunds: %+v", i+1, res)
					}
				}
			})
		}
	}
}

func TestRefundBadInput(t *testing.T) {
	ctx := context.Background()
	for _, store := range testStores(t) {
		l, err := algorithms.New(store.store, algorithms.TokenBucket, algorithms.PerSecond(10))
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			key  string
			cost int
			age  time.Duration
			want error
		}{
			{"zero cost", "k", 0, 0, algorithms.ErrInvalidCost},
			{"negative cost", "k", -5, 0, algorithms.ErrInvalidCost},
			{"negative age", "k", 1, -time.Second, algorithms.ErrInvalidAge},
			{"empty key", "", 1, 0, algorithms.ErrInvalidKey},
		} {
			if _, err := l.Refund(ctx, tc.key, tc.cost, tc.age); !errors.Is(err, tc.want) {
				t.Errorf("%s/%s: err %v, want %v", store.name, tc.name, err, tc.want)
			}
		}
	}
}

type namedStore struct {
	name  string
	store algorithms.Store
}

// testStores are a memory store, a Redis store and a Cluster store, each
// with a prefix of its own.
func testStores(t *testing.T) []namedStore {
	t.Helper()
	single := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t), MaxRetries: -1})
	t.Cleanup(func() { single.Close() })
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.Cluster(t), MaxRetries: -1})
	t.Cleanup(func() { cluster.Close() })
	return []namedStore{
		{"memory", must(memstore.New())},
		{"redis", must(New(single, WithPrefix(t.Name()), WithTimeout(time.Minute)))},
		{"cluster", must(New(cluster, WithPrefix(t.Name()), WithTimeout(time.Minute)))},
	}
}
