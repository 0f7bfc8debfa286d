//go:build scale

// The fault path's bounds at scale: tens of thousands of identities, three
// stores on separate clients, the fault beginning before the load. These
// take minutes; `make test-scale` runs them (go test -tags scale).

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

// scaleStores returns n stores on separate clients of srv, each with
// opts, and a limiter of alg and limits on each.
func scaleStores(t *testing.T, srv *redistest.Server, n int, alg algorithms.Algorithm, limits []algorithms.Limit, opts ...Option) ([]*Store, []algorithms.RateLimiter) {
	t.Helper()
	return scaleStoresAt(t, srv.Addr, n, alg, limits, opts...)
}

// scaleStoresAt is scaleStores with the clients connecting to addr.
func scaleStoresAt(t *testing.T, addr string, n int, alg algorithms.Algorithm, limits []algorithms.Limit, opts ...Option) ([]*Store, []algorithms.RateLimiter) {
	t.Helper()
	var stores []*Store
	var ls []algorithms.RateLimiter
	for range n {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true, PoolSize: 16})
		t.Cleanup(func() { _ = c.Close() })
		s := must(New(c, append([]Option{WithInstances(n), WithLogger(quietLogger())}, opts...)...))
		t.Cleanup(func() { _ = s.Close(closeCtx()) })
		l, err := algorithms.New(s, alg, limits...)
		if err != nil {
			t.Fatal(err)
		}
		stores, ls = append(stores, s), append(ls, l)
	}
	return stores, ls
}

// spend sends each of keys per requests to the limiters in turn, from 16
// goroutines, and adds what each key was admitted to admitted.
func spend(t *testing.T, ls []algorithms.RateLimiter, keys, per int, admitted []atomic.Int32) {
	t.Helper()
	forEachKeyN(16, keys, func(i int) {
		for r := range per {
			res, err := ls[(i+r)%len(ls)].Allow(context.Background(), keyName(i), 1)
			if err != nil {
				t.Errorf("key %d: %v", i, err)
				return
			}
			if res.Allowed {
				admitted[i].Add(1)
			}
		}
	})
}

// overBound counts the keys admitted more than bound, and the most any was.
func overBound(admitted []atomic.Int32, bound int32) (over int, most int32) {
	for i := range admitted {
		n := admitted[i].Load()
		most = max(most, n)
		if n > bound {
			over++
		}
	}
	return over, most
}

// Rows of the fault path's table: keys spend their limit L through Redis
// (and, for the denied rows, are refused once more), Redis is frozen, and
// every key asks again: each is admitted at most L + n over the period,
// at 40,000 and 160,000 identities (the table of answers holds 32,768, the
// denial cache 100,000), with one store and with three.
func TestScaleForgottenAnswers(t *testing.T) {
	cases := []struct {
		keys, stores, limit int
		denied              bool
	}{
		{40_000, 1, 9, false},
		{30_000, 3, 9, false},
		{160_000, 1, 3, true},
	}
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindowCounter, algorithms.TokenBucket, algorithms.LeakyBucket} {
		for _, c := range cases {
			if c.keys > 40_000 && alg != algorithms.FixedWindow {
				continue // one algorithm at the largest size: minutes each
			}
			t.Run(fmt.Sprintf("%s/%d keys/%d stores", alg, c.keys, c.stores), func(t *testing.T) {
				srv := redistest.StartServer(t)
				obs := &storeEvents{errors: map[ErrorKind]int{}}
				_, ls := scaleStores(t, srv, c.stores, alg, []algorithms.Limit{algorithms.PerHour(c.limit)}, WithTimeout(50*time.Millisecond), WithObserver(obs))
				admitted := make([]atomic.Int32, c.keys)
				per := c.limit
				if c.denied {
					per++
				}
				spend(t, ls, c.keys, per, admitted)
				// Exact while every call is answered; a call that timed out
				// on a loaded machine was decided by the fault path, whose
				// bound (L + n over the period) the second half checks.
				if over, most := overBound(admitted, int32(c.limit)); over > 0 {
					if failed := obs.total(); failed == 0 {
						t.Fatalf("%d keys over the limit through Redis (up to %d), no call failed", over, most)
					} else {
						t.Logf("%d keys over the limit (up to %d) after %d failed calls", over, most, failed)
					}
				}
				srv.Freeze()
				defer srv.Thaw()
				spend(t, ls, c.keys, 3*c.stores, admitted)
				over, most := overBound(admitted, int32(c.limit+c.stores))
				t.Logf("%d keys: at most %d admitted each (bound L + n = %d), %d over", c.keys, most, c.limit+c.stores, over)
				if over > 0 {
					t.Errorf("%d of %d keys admitted more than L + n = %d (up to %d)", over, c.keys, c.limit+c.stores, most)
				}
			})
		}
	}
}

// Three stores, 20,000 identities, a fault that begins before the load
// (Redis frozen, paused with CLIENT PAUSE, killed and restarted empty, or
// behind a partition that drops every packet): each store's twin admits its
// share of every key and owes it; the fault ends and the traffic resumes
// at once through every store. The charges settle at Redis's speed and the
// gates hold each key until every store's debts have landed, so no key is
// admitted more than L + n over the period, for each algorithm and a
// limiter of two limits. The time the three stores take to owe nothing
// is logged.
func TestScaleSettleAtRedisSpeed(t *testing.T) {
	const keys, limit, n = 20_000, 9, 3
	// Each fault: the address the stores use, and what begins and ends it.
	faults := map[string]func(t *testing.T, srv *redistest.Server) (addr string, begin, end func()){
		"freeze": func(_ *testing.T, srv *redistest.Server) (string, func(), func()) {
			return srv.Addr, srv.Freeze, srv.Thaw
		},
		// A pause of 5 s (no command ends one early: CLIENT UNPAUSE waits
		// too), over once the load has been sent.
		"pause": func(_ *testing.T, srv *redistest.Server) (string, func(), func()) {
			var at time.Time
			return srv.Addr, func() { _, _ = srv.Do("CLIENT", "PAUSE", "5000", "ALL"); at = time.Now() },
				func() { time.Sleep(time.Until(at.Add(5 * time.Second))) }
		},
		// Killed before the load and restarted empty: nothing was counted
		// before, so the bound is L + n still.
		"restart": func(_ *testing.T, srv *redistest.Server) (string, func(), func()) {
			return srv.Addr, srv.Kill, srv.Restart
		},
		// Every packet dropped, both ways, the connections left open.
		"partition": func(t *testing.T, srv *redistest.Server) (string, func(), func()) {
			p := newCutProxy(t, srv.Addr)
			return p.addr, func() { p.cut.Store(true) }, func() { p.cut.Store(false) }
		},
	}
	limiters := []struct {
		alg    algorithms.Algorithm
		limits []algorithms.Limit
	}{
		{algorithms.FixedWindow, []algorithms.Limit{algorithms.PerHour(limit)}},
		{algorithms.SlidingWindowCounter, []algorithms.Limit{algorithms.PerHour(limit)}},
		{algorithms.TokenBucket, []algorithms.Limit{algorithms.PerHour(limit)}},
		{algorithms.FixedWindow, []algorithms.Limit{algorithms.PerHour(limit), {Rate: 4 * limit, Period: 24 * time.Hour}}},
	}
	for name, fault := range faults {
		for _, lim := range limiters {
			if name != "freeze" && lim.alg != algorithms.FixedWindow {
				continue // the algorithms under one fault; the faults under one algorithm
			}
			t.Run(fmt.Sprintf("%s/%s/%d limits", name, lim.alg, len(lim.limits)), func(t *testing.T) {
				srv := redistest.StartServer(t)
				addr, begin, end := fault(t, srv)
				stores, ls := scaleStoresAt(t, addr, n, lim.alg, lim.limits, WithTimeout(50*time.Millisecond))
				admitted := make([]atomic.Int32, keys)
				begin()
				spend(t, ls, keys, 2*n, admitted)
				end()
				ended := time.Now()
				done := make(chan time.Duration, 1)
				go func() { done <- allSettled(stores, ended) }()
				spend(t, ls, keys, 2*n, admitted)
				select {
				case d := <-done:
					t.Logf("%d stores × %d owed keys settled %v after the fault ended", n, keys, d.Round(time.Millisecond))
				case <-time.After(30 * time.Second):
					t.Fatal("charges still owed 30 s after the fault ended")
				}
				spend(t, ls, keys, n, admitted)
				over, most := overBound(admitted, limit+n)
				t.Logf("at most %d admitted a key (bound L + n = %d), %d keys over", most, limit+n, over)
				if over > 0 {
					t.Errorf("%d of %d keys admitted more than L + n = %d (up to %d)", over, keys, limit+n, most)
				}
			})
		}
	}
}

// allSettled waits until no store owes anything and returns how long
// after since that was.
func allSettled(stores []*Store, since time.Time) time.Duration {
	for owedKeys(stores...) > 0 {
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(since)
}

// Saturation is not a fault of Redis, but it hands decisions to the twin
// too: three stores whose queue to Redis holds 16 decisions, flooded by
// 20,000 identities from 256 goroutines, with no fault at all. A twin
// decides such a request from at most one unit a window (localSaturated),
// since Redis goes on admitting for the other stores meanwhile, and what
// it admits is charged: no identity passes more than L + n.
func TestScaleSaturation(t *testing.T) {
	const keys, limit, n = 20_000, 9, 3
	srv := redistest.StartServer(t)
	_, ls := scaleStores(t, srv, n, algorithms.FixedWindow, []algorithms.Limit{algorithms.PerHour(limit)},
		WithTimeout(50*time.Millisecond), WithMaxWaiting(16))
	admitted := make([]atomic.Int32, keys)
	var local atomic.Int64
	forEachKeyN(256, keys, func(i int) {
		for r := range 2 * (limit + n) {
			res, err := ls[(i+r)%n].Allow(context.Background(), keyName(i), 1)
			if err != nil {
				t.Errorf("key %d: %v", i, err)
				return
			}
			if res.Decider == algorithms.DecidedLocally {
				local.Add(1)
			}
			if res.Allowed {
				admitted[i].Add(1)
			}
		}
	})
	over, most := overBound(admitted, limit+n)
	t.Logf("%d decided locally; at most %d admitted a key (bound L + n = %d)", local.Load(), most, limit+n)
	if local.Load() == 0 {
		t.Fatal("the flood never filled the queue: nothing was decided locally")
	}
	if over > 0 {
		t.Errorf("%d of %d keys admitted more than L + n = %d (up to %d)", over, keys, limit+n, most)
	}
}

// An outage during which one client sends from 65,536 identities (IPv6
// /64s of one /48) fills the charge table (maxOwedKeys): at least
// 99% of 1,000 other clients' first requests still pass, and no identity
// is admitted more than L + n.
func TestScaleOneClientManyIdentities(t *testing.T) {
	const attackers, honest, limit = 1 << 16, 1000, 10
	srv := redistest.StartServer(t)
	stores, ls := scaleStores(t, srv, 1, algorithms.FixedWindow, []algorithms.Limit{algorithms.PerHour(limit)}, WithTimeout(50*time.Millisecond))
	srv.Stop()
	l := ls[0]
	ctx := context.Background()
	var most atomic.Int32
	forEachKeyN(16, attackers+100, func(i int) {
		key := fmt.Sprintf("ip:2001:db8:0:%x::/64", i)
		n := int32(0)
		for range limit + 2 {
			if res, _ := l.Allow(ctx, key, 1); res.Allowed {
				n++
			}
		}
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
	})
	owed := owedKeys(stores[0])
	var served atomic.Int32
	forEachKeyN(16, honest, func(i int) {
		if res, _ := l.Allow(ctx, fmt.Sprintf("ip:198.51.%d.%d", i/256, i%256), 1); res.Allowed {
			served.Add(1)
		}
	})
	t.Logf("%d keys owe; an attacker identity admitted at most %d; %d of %d other clients' first requests passed", owed, most.Load(), served.Load(), honest)
	if most.Load() > limit+1 {
		t.Errorf("an attacker identity was admitted %d, over L + n = %d", most.Load(), limit+1)
	}
	if served.Load() < honest*99/100 {
		t.Errorf("%d of %d other clients' first requests passed; want at least 99%%", served.Load(), honest)
	}
}

// total is the number of failed calls reported, of every kind.
func (o *storeEvents) total() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, c := range o.errors {
		n += c
	}
	return n
}
