package redisstore

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// twoLimits are two limits of alg for the leases' tests: tight units per
// hour (a bucket's per day), and twice as many over twice the period.
func twoLimits(alg algorithms.Algorithm, tight int) []algorithms.Limit {
	a := leaseLimit(alg, tight)
	return []algorithms.Limit{a, {Rate: 2 * tight, Period: 2 * a.Period}}
}

// leasedLimitsOn returns a leased limiter of alg and limits on a store of
// c, with opts after WithLeases(ttl) and a decision timeout of 10 s (as
// leasedOn), and the store.
func leasedLimitsOn(t testing.TB, c redis.UniversalClient, alg algorithms.Algorithm, limits []algorithms.Limit, ttl time.Duration, opts ...Option) (*leasedLimits, *Store) {
	t.Helper()
	s := must(New(c, append([]Option{WithLeases(ttl), WithLogger(quietLogger()), WithTimeout(10 * time.Second)}, opts...)...))
	t.Cleanup(func() { _ = s.Close(closeCtx()) })
	l, err := algorithms.New(s, alg, limits...)
	if err != nil {
		t.Fatal(err)
	}
	ll, ok := l.(*leasedLimits)
	if !ok {
		t.Fatalf("%s: a %T of %d limits under WithLeases, want leased limits", alg, l, len(limits))
	}
	return ll, s
}

// leasedLimitsStores returns n stores with WithLeases(ttl) on separate
// clients of addr, each with opts, and a leased limiter of alg and limits
// on each.
func leasedLimitsStores(t *testing.T, addr string, n int, alg algorithms.Algorithm, limits []algorithms.Limit, ttl time.Duration, opts ...Option) ([]*Store, []*leasedLimits) {
	t.Helper()
	var stores []*Store
	var ls []*leasedLimits
	for range n {
		c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 16})
		t.Cleanup(func() { _ = c.Close() })
		l, s := leasedLimitsOn(t, c, alg, limits, ttl, append([]Option{WithInstances(n), WithEvictionAllowed(), WithTimeout(10 * time.Second)}, opts...)...)
		stores, ls = append(stores, s), append(ls, l)
	}
	return stores, ls
}

// limitProbes returns an exact limiter of each of limits on a store of
// addr without leases, with prefix: each reads one limit's count in Redis.
func limitProbes(t *testing.T, addr, prefix string, alg algorithms.Algorithm, limits []algorithms.Limit) []algorithms.RateLimiter {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	s := probeStore(t, c, WithPrefix(prefix), WithEvictionAllowed(), WithTimeout(10*time.Second))
	var probes []algorithms.RateLimiter
	for _, lim := range limits {
		p, err := algorithms.New(s, alg, lim)
		if err != nil {
			t.Fatal(err)
		}
		probes = append(probes, p)
	}
	return probes
}

// preUsed is what the multi-limit tests take from key i's second limit
// before they start, so that it binds for the odd keys: three quarters
// of it.
func preUsed(i, second int) int {
	if i%2 == 1 {
		return second * 3 / 4
	}
	return 0
}

// limitsBound is the most key i may be admitted over a run of span with
// its second limit's preUsed taken: each limit's quota less what was
// taken, a bucket's plus its refill over span (rounded up), the tightest
// of them.
func limitsBound(alg algorithms.Algorithm, limits []algorithms.Limit, i int, span time.Duration) int32 {
	bound := int32(-1)
	for j, lim := range limits {
		b := int64(lim.Capacity())
		if j == 1 {
			b -= int64(preUsed(i, lim.Rate))
		}
		if alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket {
			b += (int64(lim.Rate)*int64(span) + int64(lim.Period) - 1) / int64(lim.Period)
		}
		if bound < 0 || int32(b) < bound {
			bound = int32(b)
		}
	}
	return bound
}

// takePreUsed charges every odd key's second limit its preUsed through
// the probe of that limit.
func takePreUsed(t *testing.T, probes []algorithms.RateLimiter, limits []algorithms.Limit, keys int) {
	t.Helper()
	forEachKeyN(8, keys, func(i int) {
		if n := preUsed(i, limits[1].Rate); n > 0 {
			if _, err := probes[1].Charge(context.Background(), keyName(i), n); err != nil {
				t.Errorf("Charge: %v", err)
			}
		}
	})
}

// limitsAttack sends requests of every key from goroutines to the
// limiters in turn, each key from many goroutines at once, and returns
// what each key was admitted and the run's span.
func limitsAttack(t *testing.T, ls []*leasedLimits, keys, requests, goroutines int) ([]atomic.Int32, time.Duration) {
	admitted := make([]atomic.Int32, keys)
	began := time.Now()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for r := g; r < requests; r += goroutines {
				for k := range keys {
					i := (k + g*keys/goroutines) % keys
					if leaseAllowed(t, ls[(i+g+r)%len(ls)], keyName(i)) {
						admitted[i].Add(1)
					}
				}
				if t.Failed() {
					return
				}
			}
		})
	}
	wg.Wait()
	return admitted, time.Since(began)
}

// checkLimitsBound fails t for every key admitted more than its bound
// (limitsBound over span, the run's and a ttl), and returns the largest
// admitted less its bound.
func checkLimitsBound(t *testing.T, alg algorithms.Algorithm, limits []algorithms.Limit, admitted []atomic.Int32, span time.Duration) int32 {
	t.Helper()
	over, worst := 0, int32(-1<<30)
	for i := range admitted {
		a, bound := admitted[i].Load(), limitsBound(alg, limits, i, span)
		worst = max(worst, a-bound)
		if a > bound {
			if over++; over <= 5 {
				t.Errorf("key %d: admitted %d, bound %d", i, a, bound)
			}
		}
	}
	if over > 0 {
		t.Errorf("%d of %d keys admitted past their bound", over, len(admitted))
	}
	return worst
}

// Promise 1 with two limits: three stores on separate clients share a
// limiter of two limits, the second taken down to a quarter for the odd
// keys so that each limit binds for half of them; 16 goroutines send
// every key's requests, twice its tightest quota, to the stores in turn.
// Each key is admitted at most what each of its limits has left, counted
// key by key (a bucket's plus its refill over the run and a ttl).
func TestLeasedLimitsAtMostEachLimit(t *testing.T) {
	addr := redistest.Standalone(t)
	const tight, goroutines, ttl = 16, 16, 30 * time.Second
	keys := stepsOf(2000) / partOf(2) // make test: 250 keys; make test-scale: 2,000
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			prefix := "pl1-" + string(alg)
			limits := twoLimits(alg, tight)
			probes := limitProbes(t, addr, prefix, alg, limits)
			takePreUsed(t, probes, limits, keys)
			_, ls := leasedLimitsStores(t, addr, 3, alg, limits, ttl, WithPrefix(prefix))
			admitted, span := limitsAttack(t, ls, keys, 2*tight, goroutines)
			worst := checkLimitsBound(t, alg, limits, admitted, span+ttl)
			t.Logf("%d keys: the largest admitted less its bound %d", keys, worst)
		})
	}
}

// Promise 2 with two limits: every key driven until each of three stores
// is denied has been admitted at most what its tightest limit has left,
// and at least that less what the leases of that limit may hold; once
// the stores give their leases back, exactly what its tightest limit has
// left (the first limit's for the even keys, the second's for the odd).
func TestLeasedLimitsReachTightest(t *testing.T) {
	addr := redistest.Standalone(t)
	const keys, tight, n = 100, 64, 3
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			prefix := "pl2-" + string(alg)
			limits := twoLimits(alg, tight)
			probes := limitProbes(t, addr, prefix, alg, limits)
			takePreUsed(t, probes, limits, keys)
			stores, ls := leasedLimitsStores(t, addr, n, alg, limits, 30*time.Second, WithPrefix(prefix), WithDenialCache(0))
			names, admitted := keyNames(keys), make([]atomic.Int64, keys)
			// bounds returns what key i was admitted, what its tightest
			// limit had left (most), and that less what that limit's
			// leases may hold (least).
			bounds := func(i int) (a, most, least int) {
				most, least = tight, tight-n*leaseMost(tight)
				if second := 2*tight - preUsed(i, 2*tight); second < most {
					most, least = second, second-n*leaseMost(2*tight)
				}
				return int(admitted[i].Load()), most, max(least, 0)
			}
			driveKeys(t, ls, names, admitted)
			for i := range admitted {
				if a, most, least := bounds(i); a > most || a < least {
					t.Errorf("key %d: admitted %d before the leases return, want %d to %d", i, a, least, most)
				}
			}
			reachLimit(t, stores, ls, names, admitted)
			for i := range admitted {
				if a, most, _ := bounds(i); a != most {
					t.Errorf("key %d: admitted %d once the leases returned, want %d", i, a, most)
				}
			}
		})
	}
}

// limitsUnits returns the units key's leases hold on each limit of l.
func limitsUnits(l *leasedLimits, key string) []int {
	var units []int
	for _, p := range l.parts {
		u, _ := leaseUnits(p, key)
		units = append(units, u)
	}
	return units
}

// waitLimitsUnseeking waits until no renewal of key is on its way on any
// limit of l.
func waitLimitsUnseeking(t *testing.T, l *leasedLimits, key string) {
	t.Helper()
	for _, p := range l.parts {
		waitUnseeking(t, p, key)
	}
}

// untilLimitsLeased sends key to l until every limit holds units leased
// to it: leaseBusy requests, decided exactly, the last asking for the
// leases; then, should a grant not land (a renewal the worker's full
// queue refused, or a pipeline that failed on a loaded machine), one
// request more at a time, as a busy key asks again.
func untilLimitsLeased(t *testing.T, l *leasedLimits, key string) {
	t.Helper()
	for range leaseBusy {
		leaseAllowed(t, l, key)
	}
	for more := 0; ; more++ {
		waitLimitsUnseeking(t, l, key)
		units := limitsUnits(l, key)
		if !slices.Contains(units, 0) {
			return
		}
		if more == 10 {
			t.Fatalf("%s: units leased %v after %d requests, want a lease in every limit", key, units, leaseBusy+more)
		}
		leaseAllowed(t, l, key)
	}
}

// A key that a limit's full lease table has no room for is decided in
// Redis exactly: its requests are counted in every limit, and the units
// the other limit leased it stay unspent (given back in memory by every
// request the full table sends to Redis).
func TestLeasedLimitsFullTableDecidesExactly(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			limits := twoLimits(alg, 100)
			prefix := "plfull-" + string(alg)
			l, _ := leasedLimitsOn(t, c, alg, limits, time.Minute, WithPrefix(prefix), WithEvictionAllowed())
			l.parts[0].table = newLeaseTable(4, leaseBusy)
			l.parts[1].table = newLeaseTable(2, leaseBusy)
			probes := limitProbes(t, addr, prefix, alg, limits)
			// Keys 0 and 1 find room in both tables, 2 and 3 in the
			// first only; 4 in neither. leaseBusy requests a key, all
			// decided exactly, the last bringing leases where there is
			// room; then requests that the leases decide where every
			// limit has them.
			for i, leases := range [][2]bool{{true, true}, {true, true}, {true, false}, {true, false}, {false, false}} {
				key := keyName(i)
				for range leaseBusy {
					if !leaseAllowed(t, l, key) {
						t.Fatalf("%s denied", key)
					}
				}
				waitLimitsUnseeking(t, l, key)
				first := limitsUnits(l, key)
				const more = 5
				for range more {
					if !leaseAllowed(t, l, key) {
						t.Fatalf("%s denied", key)
					}
				}
				waitLimitsUnseeking(t, l, key)
				units := limitsUnits(l, key)
				for j, p := range probes {
					if (first[j] > 0) != leases[j] {
						t.Errorf("%s, limit %d: %d units leased, want a lease %v", key, j, first[j], leases[j])
					}
					if u := used(t, p, key); u != leaseBusy+more+units[j] {
						t.Errorf("%s, limit %d: used %d with %d units leased after %d requests", key, j, u, units[j], leaseBusy+more)
					}
				}
				if !leases[1] && units[0] != first[0] {
					t.Errorf("%s: the first limit's lease went from %d to %d units while the second had no room", key, first[0], units[0])
				}
			}
		})
	}
}

// A decision from the leases of every limit allocates nothing.
func TestLeasedLimitsDecisionAllocatesNothing(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
	t.Cleanup(func() { _ = c.Close() })
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			l, _ := leasedLimitsOn(t, c, alg, twoLimits(alg, 100_000), time.Minute,
				WithPrefix("plalloc-"+string(alg)), WithEvictionAllowed())
			untilLimitsLeased(t, l, "k")
			if allocs := allowAllocs(t, l, "k", l.parts[0].table, l.parts[1].table); allocs != 0 {
				t.Errorf("%.1f allocations per decision from leases of two limits, want 0", allocs)
			}
		})
	}
}
