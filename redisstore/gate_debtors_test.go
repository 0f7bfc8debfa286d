package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// A gate waits for the other stores' debts, not for a guess: a store
// admits its share of 20 a minute (5 of 4 instances) locally while Redis
// is frozen and settles it once Redis is back; another store on the prefix
// still lists itself as a debtor, so past the gate's grace the key stays
// held to the twin: every request refused, though Redis has room (it
// counts them: the strict side); once the other store's entry goes, Redis
// decides again and admits.
func TestGateWaitsForOtherDebtors(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	store := must(New(c, WithInstances(4), WithTimeout(50*time.Millisecond), WithLogger(quietLogger()), WithDenialCache(0)))
	l, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(20))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	other := func(op string) {
		t.Helper()
		if err := debtorsScript.Run(ctx, c, []string{"rl:debtors"}, "another-store", op, debtorTTL.Milliseconds()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	srv.Freeze()
	local := 0
	for range 8 {
		if res, _ := l.Allow(ctx, "k", 1); res.Allowed {
			local++
		}
	}
	srv.Thaw()
	if local != 5 {
		t.Fatalf("%d admitted locally; want this instance's share, 5", local)
	}
	other("+")
	renew := time.NewTicker(500 * time.Millisecond)
	defer renew.Stop()
	end := time.Now().Add(3 * time.Second) // past the breaker's probe and the gate's grace
	for time.Now().Before(end) {
		res, err := l.Allow(ctx, "k", 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			t.Fatalf("admitted %v after Redis came back while another store owes: %+v", time.Until(end), res)
		}
		select {
		case <-renew.C:
			other("+")
		default:
		}
		time.Sleep(250 * time.Millisecond)
	}
	if res, err := l.Peek(ctx, "k"); err != nil || res.Remaining < 1 || res.Decider != algorithms.DecidedByStore {
		t.Fatalf("Redis says %+v (%v); want room left", res, err)
	}
	other("-")
	deadline := time.Now().Add(time.Second)
	for {
		res, err := l.Allow(ctx, "k", 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			if res.Decider != algorithms.DecidedByStore {
				t.Fatalf("admitted by %v; want Redis", res.Decider)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still refused 1 s after no other store owes")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
