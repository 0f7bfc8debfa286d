package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// However many identities one client uses while Redis is away, the others
// keep being served: with the charge table's capacity set to 256 and Redis
// stopped before the load, an attacker's 1,024 identities (four times the
// capacity) fill the table, and still 99 of 100 other clients' first
// requests pass; a key the table had no room for is admitted at most
// forgottenAllowance, owing nothing, so no identity passes L + n.
func TestFullChargeTableServesOthers(t *testing.T) {
	const capacity, attackers, honest, limit = 256, 1024, 100, 5
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	store := must(New(c, WithTimeout(20*time.Millisecond), WithLogger(quietLogger())))
	store.guard.batcher.maxOwed = capacity
	l, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(limit))
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	ctx := context.Background()
	admitted := func(key string, n int) int {
		got := 0
		for range n {
			res, err := l.Allow(ctx, key, 1)
			if err != nil || res.Decider != algorithms.DecidedLocally {
				t.Fatalf("%s: %+v %v; want a local decision", key, res, err)
			}
			if res.Allowed {
				got++
			}
		}
		return got
	}
	full := 0 // attacker keys admitted beyond the allowance: those the table held
	for i := range attackers {
		n := admitted("attacker-"+keyName(i), limit+2)
		if n > limit {
			t.Fatalf("attacker key %d admitted %d, over its limit %d", i, n, limit)
		}
		if n > forgottenAllowance {
			full++
		}
	}
	if full > capacity {
		t.Errorf("%d attacker keys admitted more than %d: the table holds %d", full, forgottenAllowance, capacity)
	}
	store.guard.batcher.mu.Lock()
	owed := len(store.guard.batcher.owed)
	store.guard.batcher.mu.Unlock()
	if owed > capacity {
		t.Errorf("%d keys owe, beyond the capacity %d", owed, capacity)
	}
	served := 0
	for i := range honest {
		if admitted("honest-"+keyName(i), 1) == 1 {
			served++
		}
	}
	if served < honest*99/100 {
		t.Errorf("%d of %d other clients' first requests passed with the charge table full; want at least 99%%", served, honest)
	}
}
