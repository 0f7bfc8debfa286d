package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// Remaining under a lease is never more than what the key has left, this
// instance's unspent units included: on one instance, L minus what it
// admitted, exactly when the request was decided from a lease.
func TestLeaseRemainingNeverAboveKey(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
	t.Cleanup(func() { _ = c.Close() })
	const limit = 200
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			l, _ := leasedOn(t, c, alg, leaseLimit(alg, limit), time.Minute, WithPrefix("rem-"+string(alg)))
			admitted := 0
			for i := range limit + 5 {
				units, _ := leaseUnits(l, "k")
				res, err := l.Allow(context.Background(), "k", 1)
				if err != nil {
					t.Fatal(err)
				}
				if res.Allowed {
					admitted++
				}
				switch {
				case res.Remaining > limit-admitted:
					t.Fatalf("request %d: Remaining %d, above the key's %d", i, res.Remaining, limit-admitted)
				case units > 0 && res.Remaining != limit-admitted:
					t.Errorf("request %d, from a lease: Remaining %d, want %d", i, res.Remaining, limit-admitted)
				case res.Allowed && (res.ResetAfter <= 0 || res.ResetAfter > 2*res.Period):
					t.Errorf("request %d: ResetAfter %s, want within two periods (%s)", i, res.ResetAfter, res.Period)
				}
				waitUnseeking(t, l, "k")
			}
			if admitted != limit {
				t.Errorf("admitted %d on one instance, want %d", admitted, limit)
			}
		})
	}
}

// A lease ends no later than its window: on the store's clock, timed from
// the grant's sending; after the window a request asks Redis again, and a
// return of the old lease gives nothing back to the new window.
func TestLeaseEndsWithWindow(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
	t.Cleanup(func() { _ = c.Close() })
	const period = 200 * time.Millisecond
	for _, alg := range leaseWindows {
		t.Run(string(alg), func(t *testing.T) {
			l, _ := leasedOn(t, c, alg, algorithms.Limit{Rate: 1000, Period: period}, time.Minute, WithPrefix("end-"+string(alg)))
			untilBusy(t, l, "k") // decided exactly
			// The window began in Redis before the first request returned.
			by := time.Now().Add(period)
			busyLease(t, l, "k")
			s := l.table.shard("k")
			s.mu.Lock()
			cur := s.entries["k"].cur
			s.mu.Unlock()
			if cur.left < 1 || !cur.atEnd || time.Unix(0, cur.end).After(by) {
				t.Fatalf("lease %+v, want units ending with the window, by %s", cur, by)
			}
			time.Sleep(period + 20*time.Millisecond)
			if units, _ := leaseUnits(l, "k"); units != 0 {
				t.Errorf("%d units leased after the window's end", units)
			}
			got, err := l.runLease(context.Background(), c, true, l.leaseKeys("k"), "r", cur.id, 1).Text()
			if err != nil || got != "0" {
				t.Errorf("a return after the window: %q, %v; want 0", got, err)
			}
		})
	}
}

// A request whose grant Redis cannot answer is decided by the failure
// mode, as a decision Redis could not make; units leased before go on
// being spent, counted in Redis already.
func TestLeaseOutageFallsBack(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			l, _ := leasedOn(t, c, alg, leaseLimit(alg, 1000), time.Minute,
				WithPrefix("out-"+string(alg)), WithEvictionAllowed())
			untilBusy(t, l, "held")
			busyLease(t, l, "held")
			if units, _ := leaseUnits(l, "held"); units < 1 {
				t.Fatalf("%d units leased to a busy key", units)
			}
			res, err := l.Allow(context.Background(), "held", 1) // from the lease
			if err != nil || !res.Allowed || res.Decider != algorithms.DecidedByStore {
				t.Fatalf("from a lease: %+v, %v", res, err)
			}
		})
	}
	srv.Stop()
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg)+"/stopped", func(t *testing.T) {
			l, _ := leasedOn(t, c, alg, leaseLimit(alg, 1000), time.Minute,
				WithPrefix("out-"+string(alg)), WithEvictionAllowed())
			for i := range 3 {
				res, err := l.Allow(context.Background(), "new", 1)
				if err != nil || !res.Allowed || res.Decider != algorithms.DecidedLocally {
					t.Errorf("request %d with Redis stopped: %+v, %v; want admitted by the twin", i, res, err)
				}
			}
		})
	}
}

// A decision from a lease allocates nothing.
func TestLeaseDecisionAllocatesNothing(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
	t.Cleanup(func() { _ = c.Close() })
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			l, _ := leasedOn(t, c, alg, algorithms.Limit{Rate: 1_000_000, Period: time.Hour}, time.Minute,
				WithPrefix("alloc-"+string(alg)), WithEvictionAllowed())
			untilBusy(t, l, "k") // decided exactly
			busyLease(t, l, "k")
			if allocs := allowAllocs(t, l, "k", l.table); allocs != 0 {
				t.Errorf("%.1f allocations per decision from a lease, want 0", allocs)
			}
		})
	}
}

// Close with Redis gone gives up giving leases back within one call
// timeout, however many keys hold leases.
func TestLeaseCloseWithRedisStopped(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	l, s := leasedOn(t, c, algorithms.FixedWindow, algorithms.Limit{Rate: 1000, Period: time.Minute}, time.Minute,
		WithEvictionAllowed(), WithTimeout(50*time.Millisecond))
	// Each key busy, so that it holds a lease. The deadline is short for
	// Close's sake: a request it ends is decided locally, which is
	// allowed here as long as most keys hold leases.
	const keys = 500
	for i := range keys {
		for range leaseBusy {
			if _, err := l.Allow(context.Background(), keyName(i), 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	held := 0
	for i := range keys {
		waitUnseeking(t, l, keyName(i))
		if units, _ := leaseUnits(l, keyName(i)); units > 0 {
			held++
		}
	}
	if held < keys/2 {
		t.Fatalf("%d of %d keys hold leases, want most", held, keys)
	}
	srv.Stop()
	began := time.Now()
	_ = s.Close(closeCtx())
	if took, most := time.Since(began), 2*s.guard.callTimeout(); took > most {
		t.Errorf("Close took %s with Redis stopped, want at most %s", took, most)
	}
}
