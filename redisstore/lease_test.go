package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// leasedStores returns n stores with WithLeases(ttl) on separate clients
// of addr, each with opts, and a leased limiter of alg and lim on each.
func leasedStores(t *testing.T, addr string, n int, alg algorithms.Algorithm, lim algorithms.Limit, ttl time.Duration, opts ...Option) ([]*Store, []*leasedLimiter) {
	t.Helper()
	var stores []*Store
	var ls []*leasedLimiter
	for range n {
		c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 16})
		t.Cleanup(func() { _ = c.Close() })
		// A deadline that holds under -race on a busy machine: these
		// tests are about Redis answering.
		l, s := leasedOn(t, c, alg, lim, ttl, append([]Option{WithInstances(n), WithEvictionAllowed(), WithTimeout(10 * time.Second)}, opts...)...)
		stores, ls = append(stores, s), append(ls, l)
	}
	return stores, ls
}

// leaseAllowed sends one request of key to l and reports whether it passed; a
// decision Redis did not make fails the test (these tests are about Redis
// answering).
func leaseAllowed(t *testing.T, l algorithms.Limiter, key string) bool {
	res, err := l.Allow(context.Background(), key, 1)
	if err != nil {
		t.Errorf("Allow: %v", err)
		return false
	}
	if res.Decider != algorithms.DecidedByStore && res.Decider != algorithms.DecidedByCache {
		t.Errorf("decided by %s, want Redis or a lease", res.Decider)
	}
	return res.Allowed
}

// untilBusy sends key to l the requests it takes to turn busy, all but
// the last (leaseBusy − 1, each decided exactly): the next one asks for
// a lease (busyLease).
func untilBusy(t *testing.T, l *leasedLimiter, key string) {
	t.Helper()
	for range leaseBusy - 1 {
		if !leaseAllowed(t, l, key) {
			t.Fatalf("%s refused before it was busy", key)
		}
	}
}

// busyLease sends key to l, after untilBusy, the request that turns it
// busy: decided exactly, it asks for the key's first lease in the
// background; busyLease returns once that lease has landed.
func busyLease(t *testing.T, l *leasedLimiter, key string) {
	t.Helper()
	if !leaseAllowed(t, l, key) {
		t.Fatalf("%s refused as it turned busy", key)
	}
	waitUnseeking(t, l, key)
}

// Promise 1: three stores on separate clients share a limit L; 16
// goroutines send every key's requests, twice its limit, to the stores in
// turn, each key from many goroutines at once. Each key is admitted at
// most L in its window, counted key by key; a bucket's key at most
// Burst + Rate × (t + ttl) over the run's span t.
func TestLeasesAtMostLimitPerKey(t *testing.T) {
	addr := redistest.Standalone(t)
	const limit, rounds, goroutines = 32, 4, 16 // 2 × 32 requests per key
	keys := stepsOf(1200) / partOf(2)           // make test: 150 keys; make test-scale: 1,200
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			const ttl = 30 * time.Second
			began := time.Now()
			_, ls := leasedStores(t, addr, 3, alg, leaseLimit(alg, limit), ttl,
				WithPrefix("p1-"+string(alg)))
			admitted := make([]atomic.Int32, keys)
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for r := range rounds {
						for k := range keys {
							i := (k + g*keys/goroutines) % keys
							if leaseAllowed(t, ls[(i+g+r)%len(ls)], keyName(i)) {
								admitted[i].Add(1)
							}
						}
					}
				})
			}
			wg.Wait()
			bound := int32(limit)
			if lim := leaseLimit(alg, limit); alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket {
				span := time.Since(began) + ttl
				bound += int32((int64(lim.Rate)*int64(span) + int64(lim.Period) - 1) / int64(lim.Period))
			}
			if over, most := overBoundKeys(admitted, bound); over > 0 {
				t.Errorf("%d of %d keys admitted more than %d, one %d", over, keys, bound, most)
			}
		})
	}
}

// overBoundKeys counts the keys admitted more than bound, and the most any
// was.
func overBoundKeys(admitted []atomic.Int32, bound int32) (over int, most int32) {
	for i := range admitted {
		n := admitted[i].Load()
		most = max(most, n)
		if n > bound {
			over++
		}
	}
	return over, most
}

// Promise 2: every key driven until each of three stores is denied has
// been admitted at least L - N × q (what leases still hold), and at most
// L; once the stores give their leases back, it reaches exactly L (the
// buckets' refill less than a token meanwhile).
func TestLeasesReachLimit(t *testing.T) {
	addr := redistest.Standalone(t)
	const limit, n = 64, 3
	keys := stepsOf(600) // make test-scale: 600 keys
	q := leaseMost(limit)
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			stores, ls := leasedStores(t, addr, n, alg, leaseLimit(alg, limit), 30*time.Second,
				WithPrefix("p2-"+string(alg)), WithDenialCache(0))
			names, admitted := keyNames(keys), make([]atomic.Int64, keys)
			driveKeys(t, ls, names, admitted)
			for i := range admitted {
				if a := int(admitted[i].Load()); a > limit || a < limit-n*q {
					t.Errorf("key %d: admitted %d before the leases return, want %d to %d", i, a, limit-n*q, limit)
				}
			}
			reachLimit(t, stores, ls, names, admitted)
			for i := range admitted {
				if a := int(admitted[i].Load()); a != limit {
					t.Errorf("key %d: admitted %d once the leases returned, want %d", i, a, limit)
				}
			}
		})
	}
}

// driveUntilDenied sends key's requests to every limiter of ls in turn
// until a whole turn is denied, and returns how many passed.
func driveUntilDenied[L algorithms.Limiter](t *testing.T, ls []L, key string) int {
	passed := 0
	for {
		some := false
		for _, l := range ls {
			for leaseAllowed(t, l, key) {
				passed, some = passed+1, true
			}
		}
		if !some || t.Failed() {
			return passed
		}
	}
}

// leaseCommands counts the commands a client sends on its own and in
// pipelines.
type leaseCommands struct{ single, pipelined atomic.Int64 }

func (c *leaseCommands) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *leaseCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.single.Add(1)
		return next(ctx, cmd)
	}
}

func (c *leaseCommands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.pipelined.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// leaseUnits returns the units key's leases hold on l, and whether a grant
// of it is on its way.
func leaseUnits(l *leasedLimiter, key string) (units int, seeking bool) {
	s := l.table.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[key]
	if e == nil {
		return 0, false
	}
	now := l.guard.leaseNow()
	return e.cur.units(now) + e.next.units(now), e.seeking
}

// A cold key's requests are one command each, as on the exact store,
// until it is busy (leaseBusy units within a ttl), when the request,
// decided exactly, has the key's first lease asked for in a pipeline; a
// busy key's requests that find units in its lease send none, and its
// renewals ride pipelines.
func TestLeaseRoundTrips(t *testing.T) {
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			counter := &leaseCommands{}
			c := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
			t.Cleanup(func() { _ = c.Close() })
			l, _ := leasedOn(t, c, alg, algorithms.Limit{Rate: 100_000, Period: time.Hour}, time.Minute, WithEvictionAllowed())
			if err := l.script.Load(context.Background(), c).Err(); err != nil {
				t.Fatal(err)
			}
			leaseAllowed(t, l, "warm") // loads the exact path's scripts
			c.AddHook(counter)
			// A cold key's requests are decided exactly, as without
			// leases, until the leaseBusy-th asks for a lease, which comes
			// by a pipeline.
			for i := range leaseBusy {
				if !leaseAllowed(t, l, "cold") || counter.single.Load() != int64(i+1) {
					t.Fatalf("a cold key's requests 1 to %d sent %d commands, want %d", i+1, counter.single.Load(), i+1)
				}
				if units, seeking := leaseUnits(l, "cold"); i < leaseBusy-1 && (units > 0 || seeking || counter.pipelined.Load() != 0) {
					t.Fatalf("after a cold key's request %d: %d units leased (seeking %v), %d commands in pipelines", i+1, units, seeking, counter.pipelined.Load())
				}
			}
			waitUnseeking(t, l, "cold")
			if units, _ := leaseUnits(l, "cold"); units < 1 || counter.single.Load() != leaseBusy || counter.pipelined.Load() != 1 {
				t.Fatalf("after a cold key turned busy: %d units leased, %d commands alone and %d in pipelines, want a lease, %d and 1",
					units, counter.single.Load(), counter.pipelined.Load(), leaseBusy)
			}
			const requests = 1000
			fromLease := 0
			for i := range requests {
				units, _ := leaseUnits(l, "busy")
				before := counter.single.Load()
				if !leaseAllowed(t, l, "busy") {
					t.Fatalf("request %d denied", i)
				}
				if sent := counter.single.Load() - before; units > 0 {
					fromLease++
					if sent != 0 {
						t.Fatalf("request %d, with %d units leased, sent %d commands", i, units, sent)
					}
				}
				waitUnseeking(t, l, "busy")
			}
			if fromLease < requests*9/10 {
				t.Errorf("%d of %d requests decided from leases, want at least 90%%", fromLease, requests)
			}
			t.Logf("%d requests: %d from leases, %d commands alone, %d in pipelines", requests, fromLease,
				counter.single.Load()-leaseBusy, counter.pipelined.Load())
		})
	}
}

// waitUnseeking waits until no grant of key is on its way on l.
func waitUnseeking(t *testing.T, l *leasedLimiter, key string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Microsecond) {
		if _, seeking := leaseUnits(l, key); !seeking {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a renewal never landed")
		}
	}
}

// A key the full lease table has no room for is decided in Redis exactly:
// its request is counted and no units are leased to it.
func TestLeaseTableFullDecidesExactly(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
	t.Cleanup(func() { _ = c.Close() })
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			lim := leaseLimit(alg, 100)
			prefix := "full-" + string(alg)
			l, _ := leasedOn(t, c, alg, lim, time.Minute, WithPrefix(prefix))
			l.table = newLeaseTable(2, leaseBusy)
			probe, err := algorithms.New(probeStore(t, c, WithPrefix(prefix)), alg, lim)
			if err != nil {
				t.Fatal(err)
			}
			// leaseBusy requests a key, each decided exactly, the last
			// asking for a lease while the table has room; then the
			// requests alone.
			for i, leases := range []bool{true, true, false, false} {
				key := keyName(i)
				for range leaseBusy {
					if !leaseAllowed(t, l, key) {
						t.Fatalf("%s denied", key)
					}
				}
				waitUnseeking(t, l, key)
				leased, _ := leaseUnits(l, key)
				if u := used(t, probe, key); (leased > 0) != leases || u != leaseBusy+leased {
					t.Errorf("%s (table of 2 keys): used %d with %d units leased, want a lease %v and the requests counted", key, u, leased, leases)
				}
			}
		})
	}
}

// Close gives back the leases and stops the worker; the limiter then
// decides exactly.
func TestLeaseWorkerStopsOnClose(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
	t.Cleanup(func() { _ = c.Close() })
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			lim := leaseLimit(alg, 100)
			prefix := "close-" + string(alg)
			l, s := leasedOn(t, c, alg, lim, time.Minute, WithPrefix(prefix))
			probe, err := algorithms.New(probeStore(t, c, WithPrefix(prefix)), alg, lim)
			if err != nil {
				t.Fatal(err)
			}
			untilBusy(t, l, "k") // decided exactly
			busyLease(t, l, "k")
			if leased, _ := leaseUnits(l, "k"); leased < 1 || used(t, probe, "k") != leaseBusy+leased {
				t.Fatalf("used %d after %d requests with %d units leased, want %d", used(t, probe, "k"), leaseBusy, leased, leaseBusy+leased)
			}
			if err := s.Close(closeCtx()); err != nil {
				t.Fatal(err)
			}
			select {
			case <-s.leases.done:
			default:
				t.Fatal("the lease worker still runs after Close")
			}
			if u := used(t, probe, "k"); u != leaseBusy {
				t.Errorf("used %d after Close, want %d: the lease given back", u, leaseBusy)
			}
			// A closed store decides by its failure mode (FailLocal: the
			// twin), and neither asks Redis nor takes a lease.
			if r, err := l.Allow(context.Background(), "k", 1); err != nil || r.Decider != algorithms.DecidedLocally {
				t.Fatalf("a request after Close: %+v, %v; want decided locally", r, err)
			}
			if u := used(t, probe, "k"); u != leaseBusy {
				t.Errorf("used %d after a request after Close, want %d: nothing asked of Redis", u, leaseBusy)
			}
		})
	}
}

// WithLeases takes a ttl from 10ms to 10 minutes; the sliding window log
// decides exactly under it, and limiters of several limits of the other
// algorithms decide from leases too.
func TestWithLeases(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	lim := algorithms.Limit{Rate: 10, Period: time.Second}
	for _, tc := range []struct {
		ttl time.Duration
		ok  bool
	}{{0, false}, {-time.Second, false}, {9 * time.Millisecond, false}, {10 * time.Millisecond, true},
		{time.Second, true}, {10 * time.Minute, true}, {10*time.Minute + 1, false}} {
		s, err := New(c, WithLeases(tc.ttl), WithEvictionAllowed())
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, algorithms.ErrInvalidOption) {
			t.Errorf("WithLeases(%s): %v", tc.ttl, err)
		}
		if s != nil {
			_ = s.Close(closeCtx())
		}
	}
	s := must(New(c, WithLeases(time.Second), WithEvictionAllowed()))
	t.Cleanup(func() { _ = s.Close(closeCtx()) })
	for _, tc := range []struct {
		alg    algorithms.Algorithm
		limits []algorithms.Limit
		leased bool
	}{
		{algorithms.FixedWindow, []algorithms.Limit{lim}, true},
		{algorithms.SlidingWindowCounter, []algorithms.Limit{lim}, true},
		{algorithms.SlidingWindowLog, []algorithms.Limit{lim}, false},
		{algorithms.TokenBucket, []algorithms.Limit{lim}, true},
		{algorithms.LeakyBucket, []algorithms.Limit{lim}, true},
		{algorithms.FixedWindow, []algorithms.Limit{lim, {Rate: 100, Period: time.Minute}}, true},
		{algorithms.TokenBucket, []algorithms.Limit{lim, {Rate: 100, Period: time.Minute}}, true},
		{algorithms.SlidingWindowLog, []algorithms.Limit{lim, {Rate: 100, Period: time.Minute}}, false},
	} {
		l, err := algorithms.New(s, tc.alg, tc.limits...)
		if err != nil {
			t.Fatal(err)
		}
		_, one := l.(*leasedLimiter)
		_, several := l.(*leasedLimits)
		if leased := one && len(tc.limits) == 1 || several && len(tc.limits) > 1; leased != tc.leased {
			t.Errorf("%s with %d limits: leased %v, want %v", tc.alg, len(tc.limits), leased, tc.leased)
		}
	}
}

// Promise 1 for the buckets while they refill: three stores on separate
// clients, 16 goroutines sending every key's requests as fast as they
// can for a second; each key is admitted at most Burst + Rate × (t + ttl)
// over the run's span t: a token leased is spent at most ttl after Redis
// took it.
func TestLeasedBucketsWithinRateAndTTL(t *testing.T) {
	addr := redistest.Standalone(t)
	const keys, goroutines, ttl = 20, 16, 100 * time.Millisecond
	lim := algorithms.Limit{Rate: 100, Period: time.Second, Burst: 10}
	for _, alg := range []algorithms.Algorithm{algorithms.TokenBucket, algorithms.LeakyBucket} {
		t.Run(string(alg), func(t *testing.T) {
			_, ls := leasedStores(t, addr, 3, alg, lim, ttl, WithPrefix("p1b-"+string(alg)))
			admitted := make([]atomic.Int32, keys)
			began := time.Now()
			stop := began.Add(time.Second)
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for r := 0; time.Now().Before(stop); r++ {
						i := (r*goroutines + g) % keys
						if leaseAllowed(t, ls[(i+r)%len(ls)], keyName(i)) {
							admitted[i].Add(1)
						}
					}
				})
			}
			wg.Wait()
			span := time.Since(began) + ttl
			bound := int32(lim.Burst) + int32((int64(lim.Rate)*int64(span)+int64(lim.Period)-1)/int64(lim.Period))
			over, most := overBoundKeys(admitted, bound)
			if over > 0 {
				t.Errorf("%d of %d keys admitted more than %d, one %d", over, keys, bound, most)
			}
			t.Logf("bound %d over %s: the most admitted %d", bound, span, most)
		})
	}
}
