package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// Leases and an outage: three stores under WithLeases spend 4 keys'
// limit L through grants and leases, to the last unit and no further (no
// denial to remember), Redis freezes, and every store asks again for each
// key, then Redis thaws and every store asks again.
// The twin starts from what the grants said was left, and a key that
// owes after the fault goes through the gate rather than take a lease, so
// no key is admitted more than L + n over the period, as without leases.
func TestLeasesOutageBound(t *testing.T) {
	const keys, limit, n = 4, 24, 3
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			srv := redistest.StartServer(t)
			lim := algorithms.Limit{Rate: limit, Period: time.Hour, Burst: limit}
			stores, ls := leasedStores(t, srv.Addr, n, alg, lim, 30*time.Second, WithTimeout(50*time.Millisecond))
			admitted := make([]int, keys)
			ask := func(i int, l *leasedLimiter) {
				res, err := l.Allow(context.Background(), fmt.Sprint("k", i), 1)
				if err != nil {
					t.Fatal(err)
				}
				if res.Allowed {
					admitted[i]++
				}
			}
			// Each key's L requests in turns, the leases given back after
			// each turn, until every key was admitted L: a lease
			// stranded with units (promise 2) refuses nothing meanwhile.
			untilLeasesReturned(t, stores, func() (short int) {
				for i := range keys {
					for r := range limit - admitted[i] {
						ask(i, ls[r%n])
					}
					short += limit - admitted[i]
				}
				return short
			})
			srv.Freeze()
			// More than a twin's share (L / n) from every store.
			for i := range keys {
				for range limit/n + 2 {
					for _, l := range ls {
						ask(i, l)
					}
				}
			}
			srv.Thaw()
			for i := range keys {
				for range limit {
					for _, l := range ls {
						ask(i, l)
					}
				}
			}
			over, most := 0, 0
			for _, a := range admitted {
				most = max(most, a)
				if a > limit+n {
					over++
				}
			}
			t.Logf("at most %d admitted a key (bound L + n = %d)", most, limit+n)
			if over > 0 {
				t.Errorf("%d of %d keys admitted more than L + n = %d (up to %d)", over, keys, limit+n, most)
			}
		})
	}
}

// A key gated after a fault (it owes what its twin admitted), and every
// key while the breaker is open, asks for no renewal, as it takes no
// grant: a renewal would lease units from a count that lacks the
// instance's charges. The key holds a lease of 40 units (a renewal goes
// at 10 left) and spends 35 of them.
func TestLeaseNoRenewalAfterFault(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(l *leasedLimiter)
	}{
		{"gated", func(l *leasedLimiter) {
			b := l.guard.batcher
			b.mu.Lock()
			b.chargeLocked(queueKey{l.redisLimiter, "k"}, 1, true, callDoubt{})
			b.gateLocked(queueKey{l.redisLimiter, "k"})
			b.mu.Unlock()
		}},
		{"breaker open", func(l *leasedLimiter) { l.guard.breaker.Trip(l.guard.clock(), "test") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
			t.Cleanup(func() { _ = c.Close() })
			l, _ := leasedOn(t, c, algorithms.FixedWindow, leaseLimit(algorithms.FixedWindow, 1000), 30*time.Second,
				WithEvictionAllowed(), WithPrefix("renew-"+tc.name))
			now := l.guard.clock().UnixNano()
			for i := range leaseBusy - 1 {
				if sp := l.table.spend("k", 1, now, int64(30*time.Second), l.most); sp.outcome != leaseExact {
					t.Fatalf("a key's request %d: %+v, want decided exactly until it is busy", i+1, sp)
				}
			}
			if sp := l.table.spend("k", 1, now, int64(30*time.Second), l.most); sp.outcome != leaseSeek {
				t.Fatalf("a key without a lease: %+v, want a grant", sp)
			}
			l.table.granted("k", heldLease{id: "L-test", left: 40, end: now + int64(time.Hour)}, 500, 0, 0, now)
			counter := &leaseGrants{}
			c.AddHook(counter)
			tc.fault(l)
			for range 35 {
				if res, err := l.Allow(context.Background(), "k", 1); err != nil || !res.Allowed {
					t.Fatalf("a request with units leased: %+v %v", res, err)
				}
			}
			l.leases.flush() // the worker has read every renewal queued
			if sent := counter.pipelined.Load(); sent != 0 {
				t.Errorf("%d renewals sent, want none", sent)
			}
		})
	}
}

// leaseGrants counts the grants a client sends in pipelines: the
// renewals.
type leaseGrants struct{ pipelined atomic.Int64 }

func (c *leaseGrants) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *leaseGrants) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (c *leaseGrants) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			// EVALSHA or EVAL, the script, the number of keys, the keys, the
			// operation.
			args := cmd.Args()
			if keys, ok := args[min(2, len(args)-1)].(int); ok && len(args) > 3+keys && args[3+keys] == "g" {
				c.pipelined.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}
