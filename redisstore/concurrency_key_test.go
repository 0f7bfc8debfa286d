package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memstore"
)

// A rollout that changes a concurrency limit's maximum runs old and new
// limiters at once: they share one lease set per key, each counting every
// lease against its own maximum, so old + new never run side by side
// uncounted. On Redis the key names no maximum.
func TestConcurrencyRolloutSharesLeases(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for _, tc := range []struct {
		name  string
		store algorithms.Store
	}{
		{"memory", must(memstore.New())},
		{"redis", must(New(c, WithTimeout(time.Second)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := mustConcurrency(t, tc.store, 3, time.Minute)
			next := mustConcurrency(t, tc.store, 2, time.Minute)
			steps := []struct {
				l       algorithms.ConcurrencyLimiter
				allowed bool
				held    int
			}{
				{old, true, 1}, {old, true, 2},
				{next, false, 2}, // the old leases count against the new maximum
				{old, true, 3},
				{old, false, 3},
			}
			var leases []*algorithms.Lease
			for i, s := range steps {
				lease := mustAcquire(t, s.l, "rollout")
				if lease.Allowed != s.allowed || lease.InFlight != s.held {
					t.Fatalf("step %d: %+v; want allowed %v with %d held", i, lease, s.allowed, s.held)
				}
				leases = append(leases, lease)
			}
			if tc.name == "redis" {
				if keys := c.Keys(context.Background(), "*rollout*").Val(); len(keys) != 1 || keys[0] != "rl:{rollout}:cc" {
					t.Errorf("keys %q, want one lease set, rl:{rollout}:cc", keys)
				}
			}
			for _, l := range leases {
				if err := l.Release(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
