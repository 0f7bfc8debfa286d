package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
)

// leaseSimLoad is how long the outage simulation's traffic lasts; its
// fault begins before it or leaseSimFaultAt into it and lasts
// leaseSimFaultFor.
const (
	leaseSimLoad     = 1500 * time.Millisecond
	leaseSimFaultAt  = 100 * time.Millisecond
	leaseSimFaultFor = 400 * time.Millisecond
)

// leaseSimFault is a fault of the outage simulation: begin starts it
// (before returning) and returns what ends it, which may wait.
type leaseSimFault struct {
	name   string
	before bool // begins before the traffic
	begin  func(t *testing.T, srv *redistest.Server, admin *redis.Client) (end func())
}

var leaseSimFaults = []leaseSimFault{
	{"freeze before the load", true, func(_ *testing.T, srv *redistest.Server, _ *redis.Client) func() {
		srv.Freeze()
		return func() { time.Sleep(leaseSimFaultFor); srv.Thaw() }
	}},
	{"pause in the load", false, func(t *testing.T, _ *redistest.Server, admin *redis.Client) func() {
		ms := fmt.Sprint(leaseSimFaultFor.Milliseconds())
		if err := admin.Do(context.Background(), "CLIENT", "PAUSE", ms, "ALL").Err(); err != nil {
			t.Error(err)
		}
		return func() { time.Sleep(leaseSimFaultFor) }
	}},
}

// Promise 3, through an outage. Derivation of what each key is held to:
//
//   - docs/redis.md's fault path bounds a key shared by n instances to
//     L + n over a period for a fault every instance sees (a pause, a
//     freeze) when no instance's last answer from Redis for the key is
//     stale: each twin starts from ⌊R/n⌋ of what Redis last told its
//     instance was left, R, and so do the others. With traffic before
//     the fault, an instance's R may predate what the others spent since
//     (under leases by up to a lease's life, spent from memory; never
//     answered: R = L), and each twin can add up to ⌊L/n⌋: L + n + n⌊L/n⌋
//     ≤ 2L + n in all, which the test asserts for a key Redis had
//     answered anyone for when the fault began, L + n for the others
//     (Redis counted nothing of them before it), and logs how far beyond
//     L + n a key went. Under leases, units leased before the fault were
//     counted when granted, so spending them during the fault takes
//     nothing from the twins, and a key that owes takes no lease until its
//     charges land: leases add nothing to this, not the N × q.
//   - Every local admission is charged once, and every request counts at
//     most once (a refused one only when Redis counted it and the gate
//     refused it); the units of a grant or renewal Redis runs after the
//     store gave up on it stay counted, at most q each, one at a time per
//     key and instance. So once the charges have landed and the leases
//     are given back, Redis's count c for a key is from admitted to
//     admitted + refused + N × q, where c is below L − 1 (Peek cannot
//     tell L − 1 from L; a charge takes at most what is left, so a key
//     admitted L or more is held at L). The light keys always have such a
//     count.
//
// Traffic: every instance's goroutines ask for random keys for
// leaseSimLoad, about a request a millisecond each; every fourth key is
// flooded, the others (light) get at most L/2 requests in all, spread
// over the run. The
// fault begins before the traffic (Redis frozen: the first grants hang
// and run when it thaws) or in its middle (CLIENT PAUSE). make test runs
// half of the sizes × algorithms × faults, every pair of values of two of
// them once or more (those whose indices add up to an even number); make
// test-scale (wholeMatrix) runs them all.
func TestLeasesThroughOutage(t *testing.T) {
	for si, size := range leaseSimSizes() {
		for ai, alg := range leaseAlgorithms {
			for fi, f := range leaseSimFaults {
				if !wholeMatrix() && (si+ai+fi)%2 != 0 {
					continue
				}
				t.Run(fmt.Sprintf("N=%d/%s/%s", size.n, alg, f.name), func(t *testing.T) {
					srv := redistest.StartServer(t)
					admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
					t.Cleanup(func() { _ = admin.Close() })
					sim := newLeaseSim(t, srv.Addr, fmt.Sprintf("p3sim-%d", fi), size, alg, 500*time.Millisecond,
						WithTimeout(100*time.Millisecond))
					sim.outage(f, srv, admin)
					sim.settle()
					sim.checkCharged()
				})
			}
		}
	}
}

// outage runs the traffic with fault f.
func (sim *leaseSim) outage(f leaseSimFault, srv *redistest.Server, admin *redis.Client) {
	var end func()
	ended := make(chan struct{})
	if f.before {
		sim.atFault()
		end = f.begin(sim.t, srv, admin)
		go func() { defer close(ended); end() }()
	} else {
		time.AfterFunc(leaseSimFaultAt, func() {
			defer close(ended)
			sim.atFault()
			f.begin(sim.t, srv, admin)()
		})
	}
	began := time.Now()
	light := make([]atomic.Int64, len(sim.keys))
	sim.each(nil, func(inst int, rng *rand.Rand) {
		for since := time.Duration(0); since < leaseSimLoad; since = time.Since(began) {
			i := rng.IntN(len(sim.keys))
			// A light key's budget grows with the run, to L/2 at its end.
			if i%4 != 0 && light[i].Add(1) > int64(float64(leaseSimQuota/2)*float64(since)/float64(leaseSimLoad)) {
				light[i].Add(-1)
				continue
			}
			sim.allow(inst, i)
			time.Sleep(time.Duration(rng.ExpFloat64() * float64(time.Millisecond)))
		}
	})
	<-ended
	if sim.local.Load() == 0 {
		sim.t.Fatal("nothing was admitted locally: the fault did not show")
	}
}

// atFault notes, as the fault begins, for each key whether Redis had
// answered any instance for it.
func (sim *leaseSim) atFault() {
	sim.answered = make([]bool, len(sim.keys))
	for i := range sim.keys {
		for inst := range sim.size.n {
			if sim.heard[inst*len(sim.keys)+i].Load() {
				sim.answered[i] = true
			}
		}
	}
}

// settle waits until no store owes Redis a charge, then has every store
// give its leases back.
func (sim *leaseSim) settle() {
	waitChargesLanded(sim.t, sim.stores)
	for i := range sim.keys {
		sim.held(i) // no grant on its way
	}
	sim.returnLeases()
}

// waitChargesLanded waits until no store owes Redis a charge, and fails
// t when one still does 20 s on.
func waitChargesLanded(t *testing.T, stores []*Store) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for owedKeys(stores...) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d keys still owed 20 s after the fault", owedKeys(stores...))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkCharged asserts, per key, the bound L + n and that Redis counted
// every admission once: admitted ≤ count ≤ admitted + refused + N × q,
// where count is exact (below L − 1).
func (sim *leaseSim) checkCharged() {
	t, n, q := sim.t, int64(sim.size.n), int64(leaseMost(leaseSimQuota))
	most, over, short, beyond := int64(0), int64(0), int64(0), int64(0)
	for i, key := range sim.keys {
		a, r := sim.admitted[i].Load(), sim.refused[i].Load()
		most, beyond = max(most, a), max(beyond, a-leaseSimQuota-n)
		bound := leaseSimQuota + n
		if sim.answered[i] {
			bound += n * (leaseSimQuota / n)
		}
		if a > bound {
			t.Errorf("%s: admitted %d, want at most %d (Redis had answered for it before the fault: %v)", key, a, bound, sim.answered[i])
		}
		c, exact := sim.count(i)
		if !exact {
			short = max(short, leaseSimQuota-a)
			continue
		}
		over = max(over, int64(c)-a)
		if int64(c) < a || int64(c) > a+r+n*q {
			t.Errorf("%s: Redis counted %d; the instances admitted %d and refused %d: want from %d to %d (N × q = %d)",
				key, c, a, r, a, a+r+n*q, n*q)
		}
	}
	t.Logf("the most admitted a key: %d (L + n = %d; beyond it by at most %d), "+
		"%d admitted locally; counted beyond what was admitted: at most %d (N × q = %d); a key Redis holds exhausted: at most %d short of L",
		most, leaseSimQuota+n, max(beyond, 0), sim.local.Load(), over, n*q, short)
}
