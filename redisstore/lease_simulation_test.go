package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// The leases' simulation: N stores on separate clients share every key's
// limit L under WithLeases(ttl), each store with several goroutines
// asking for many keys at once, for every leased algorithm; Redis is a
// real redis-server. Its sizes (N, keys, goroutines) are
// leaseSimSizes: N = 2 and 8 in make test, 32 and more keys in make
// test-scale. Every assertion is per key.
//
// The terms are docs/redis.md's ("Leased quotas"): L is the key's quota
// (ratemath.QuotaOf: the windows' Rate, the buckets' Burst), q the largest
// lease, max(1, L/8), n = N the instances of WithInstances. The limits
// here last a day (the buckets refill one token in 14 minutes), so a whole
// run is one window and Burst + Rate × (t + ttl) is Burst for the buckets.

// leaseSimQuota is L: not a multiple of 8, so that q = 12 and N × q
// (24, 96) is below L at N = 2 and 8; at N ≥ 8 a key of L = 8q would make
// N × q ≥ L, a bound that says nothing.
const leaseSimQuota = 100

// leaseSimLimit is a limit of quota L for a day, for alg.
func leaseSimLimit() algorithms.Limit {
	return algorithms.Limit{Rate: leaseSimQuota, Period: 24 * time.Hour}
}

// leaseSimSize is one size of the simulation.
type leaseSimSize struct{ n, keys, goroutines int }

// leaseSim is one run: the stores, their limiters, a probe reading Redis,
// and what each key was admitted.
type leaseSim struct {
	t        *testing.T
	stores   []*Store
	ls       []*leasedLimiter
	probe    algorithms.RateLimiter
	keys     []string
	admitted []atomic.Int64
	refused  []atomic.Int64
	heard    []atomic.Bool // instance × key: Redis answered the instance for the key
	local    atomic.Int64  // admitted by a twin
	answered []bool        // per key: Redis had answered for it as the fault began
	size     leaseSimSize
}

// simBusy is where the simulations' keys turn busy (leaseTable.busy):
// their instances ask a key for a few units a ttl (L/N a second, at ttl
// 100 ms), and at leaseBusy much of that would be decided exactly, while
// the simulations are of the leases.
const simBusy = 2

// withLeaseBusy makes a store's keys turn busy at busy units within a
// ttl instead of leaseBusy.
func withLeaseBusy(busy int) Option {
	return func(c *config) { c.redis.leaseBusy = busy }
}

// newLeaseSim starts a run of size on addr under prefix, every store with
// WithLeases(ttl), WithInstances(N) and opts.
func newLeaseSim(t *testing.T, addr, prefix string, size leaseSimSize, alg algorithms.Algorithm, ttl time.Duration, opts ...Option) *leaseSim {
	t.Helper()
	sim := &leaseSim{t: t, size: size, admitted: make([]atomic.Int64, size.keys), refused: make([]atomic.Int64, size.keys),
		heard: make([]atomic.Bool, size.n*size.keys)}
	opts = append([]Option{WithPrefix(prefix), WithEvictionAllowed(), WithInstances(size.n), withLeaseBusy(simBusy)}, opts...)
	for range size.n {
		c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 4 * size.goroutines})
		t.Cleanup(func() { _ = c.Close() })
		l, s := leasedOn(t, c, alg, leaseSimLimit(), ttl, opts...)
		sim.stores, sim.ls = append(sim.stores, s), append(sim.ls, l)
	}
	pc := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = pc.Close() })
	probe, err := algorithms.New(probeStore(t, pc, WithPrefix(prefix), WithEvictionAllowed(), WithTimeout(5*time.Second)), alg, leaseSimLimit())
	if err != nil {
		t.Fatal(err)
	}
	sim.probe = probe
	for i := range size.keys {
		sim.keys = append(sim.keys, fmt.Sprintf("sim-%d", i))
	}
	return sim
}

// allow sends one request of key i to instance at, counts it when
// admitted, and returns its Result.
func (sim *leaseSim) allow(at, i int) algorithms.Result {
	res, err := sim.ls[at].Allow(context.Background(), sim.keys[i], 1)
	if err != nil {
		sim.t.Errorf("Allow: %v", err)
		return res
	}
	if res.Decider == algorithms.DecidedByStore || res.Decider == algorithms.DecidedByCache {
		sim.heard[at*len(sim.keys)+i].Store(true)
	}
	if !res.Allowed {
		sim.refused[i].Add(1)
		return res
	}
	sim.admitted[i].Add(1)
	if res.Decider == algorithms.DecidedLocally {
		sim.local.Add(1)
	}
	return res
}

// each runs f on size.goroutines goroutines for each instance in at (all
// instances when at is nil), each with a generator of its own, and waits.
func (sim *leaseSim) each(at []int, f func(inst int, rng *rand.Rand)) {
	if at == nil {
		for i := range sim.size.n {
			at = append(at, i)
		}
	}
	var wg sync.WaitGroup
	for _, inst := range at {
		for g := range sim.size.goroutines {
			seed := uint64(inst)<<32 | uint64(g)
			wg.Go(func() { f(inst, rand.New(rand.NewPCG(seed, 27))) })
		}
	}
	wg.Wait()
}

// held returns the units every instance's leases of key i hold, once no
// grant of it is on its way.
func (sim *leaseSim) held(i int) int {
	units := 0
	for _, l := range sim.ls {
		waitUnseeking(sim.t, l, sim.keys[i])
		u, _ := leaseUnits(l, sim.keys[i])
		units += u
	}
	return units
}

// returnLeases has every store give back its leases of every key.
func (sim *leaseSim) returnLeases() { returnLeases(sim.stores) }

// count returns what Redis has counted for key i, and false when Peek
// cannot tell (the key has at most one unit left: Peek answers for one
// more request, so L − 1 and L read alike).
func (sim *leaseSim) count(i int) (int, bool) {
	p, err := sim.probe.Peek(context.Background(), sim.keys[i])
	if err != nil {
		sim.t.Fatal(err)
	}
	if !p.Allowed || p.Remaining == 0 {
		return 0, false
	}
	return p.Limit - 1 - p.Remaining, true
}

// Promise 2, bounded under-admission, while Redis answers. Derivation of
// what each key is held to:
//
//   - A refused request found no units in its instance's leases and Redis
//     had none left: the key's count in Redis is L, and every unit counted
//     was either admitted or is held unspent in some instance's leases (a
//     unit is counted when granted). So at a refusal the shortfall
//     L − admitted equals exactly the units the instances hold, which the
//     test reads from their tables: nothing lost, nothing counted twice.
//   - An instance holds its current lease and at most one more, asked for
//     once a quarter of the current one is left: at most q + ⌊q/4⌋, and
//     the quarter only after it admitted the other three. With what they
//     admitted counted against L, the N − 1 other instances (the refused
//     one holds none) hold at most N × q together: the bound asserted.
//     With q = L/8 it is L from N = 8 on, and says nothing; the exact
//     equality above still does, and the log gives the figure.
//   - Once the leases are given back, the key reaches exactly L.
//
// Traffic: every instance's goroutines ask for every key, in random order
// and runs, until each key was sent L/2 (every instance then holds leases
// and has demand); then only instance 0 floods every key until each of its
// goroutines is refused; then the leases return and every instance drives
// every key until refused.
func TestLeasesUnderAdmission(t *testing.T) {
	addr := redistest.Standalone(t)
	q := leaseMost(leaseSimQuota)
	for _, size := range leaseSimSizes() {
		for _, alg := range leaseAlgorithms {
			t.Run(fmt.Sprintf("N=%d/%s", size.n, alg), func(t *testing.T) {
				sim := newLeaseSim(t, addr, fmt.Sprintf("p2sim-%d-%s", size.n, alg), size, alg, 30*time.Second,
					WithTimeout(10*time.Second), WithDenialCache(0))
				sim.warm(leaseSimQuota / 2)
				sim.each([]int{0}, func(_ int, rng *rand.Rand) {
					for _, i := range rng.Perm(size.keys) {
						for leaseAllowed(t, sim.ls[0], sim.keys[i]) {
							sim.admitted[i].Add(1)
						}
					}
				})
				most := 0
				for i := range sim.keys {
					short, held := leaseSimQuota-int(sim.admitted[i].Load()), sim.held(i)
					most = max(most, short)
					if short != held || short > size.n*q {
						t.Errorf("%s refused after %d admitted: %d short of L = %d, leases hold %d; want equal, at most N × q = %d",
							sim.keys[i], sim.admitted[i].Load(), short, leaseSimQuota, held, size.n*q)
					}
				}
				t.Logf("under-admission at the first refusals: at most %d (bound N × q = %d)", most, size.n*q)
				sim.reachLimit()
			})
		}
	}
}

// warm has every instance's goroutines ask for random keys, a run of 1 to
// 4 requests each, until every key was sent sent requests; every request
// must be decided by Redis or a lease.
func (sim *leaseSim) warm(sent int64) {
	asked := make([]atomic.Int64, len(sim.keys))
	sim.each(nil, func(inst int, rng *rand.Rand) {
		for _, i := range rng.Perm(len(sim.keys)) {
			for asked[i].Load() < sent {
				for range 1 + rng.IntN(4) {
					if asked[i].Add(1) > sent {
						break
					}
					if leaseAllowed(sim.t, sim.ls[inst], sim.keys[i]) {
						sim.admitted[i].Add(1)
					}
				}
			}
		}
	})
}

// reachLimit gives the leases back and drives every key on every
// instance until refused, until no key gains: each must have been
// admitted exactly L.
func (sim *leaseSim) reachLimit() {
	t := sim.t
	reachLimit(t, sim.stores, sim.ls, sim.keys, sim.admitted)
	for i := range sim.keys {
		if a := sim.admitted[i].Load(); a != leaseSimQuota {
			t.Errorf("%s: admitted %d once the leases returned, want exactly L = %d", sim.keys[i], a, leaseSimQuota)
		}
	}
}
