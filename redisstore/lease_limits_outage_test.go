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

// limitsOutageTight is the outage test's first limit, L per hour (a
// bucket's per day).
const limitsOutageTight = 96

// limitsOutageBurst is how many requests a flooded key gets at a time in
// the outage test: enough that every flooded key is asked for more than
// its bound while Redis is away, and many times L over the run.
const limitsOutageBurst = 20

// limitsOutageTTL is the outage test's leases' ttl: longer than the run,
// so that every lease taken before the fault lasts through it.
const limitsOutageTTL = 5 * time.Second

// limitsOutageShapes are the outage test's pairs of limits: the first
// L an hour (a bucket's a day), the second over twice the period, of
// which the odd keys have spent three quarters before the test
// (preUsed), so that the first binds for the even keys and the second
// for the odd. With twice the quota (twoLimits), the twin charges the
// first limit down to nothing (capTwin takes every limit to the share of
// the largest quota), so the twins refuse every request: the strict
// side; with the same quota, they admit their shares.
var limitsOutageShapes = []struct {
	name   string
	limits func(alg algorithms.Algorithm) []algorithms.Limit
	twin   bool // the twins admit
}{
	{"quotas L and 2L", func(alg algorithms.Algorithm) []algorithms.Limit { return twoLimits(alg, limitsOutageTight) }, false},
	{"quotas L and L", func(alg algorithms.Algorithm) []algorithms.Limit {
		a := leaseLimit(alg, limitsOutageTight)
		return []algorithms.Limit{a, {Rate: a.Rate, Period: 2 * a.Period}}
	}, true},
}

// limitsOutage is one run of TestLeasedLimitsThroughOutage: N stores on
// separate clients with a leased limiter of two limits each, a probe per
// limit, and what each key was admitted and refused.
type limitsOutage struct {
	t        *testing.T
	alg      algorithms.Algorithm
	limits   []algorithms.Limit
	stores   []*Store
	ls       []*leasedLimits
	probes   []algorithms.RateLimiter
	admitted []atomic.Int64
	refused  []atomic.Int64
	asked    []atomic.Int64
	held     [][]int      // per key, the units each limit's leases held unspent when given back
	local    atomic.Int64 // admitted by a twin
	twinNo   atomic.Int64 // refused by a twin
	span     time.Duration
}

// Promise 3 with two limits. Derivation of what each key is held to, per
// limit j, where left_j is what the limit had for the key when the test
// began (its quota less preUsed; a bucket's plus its refill over the run)
// and q_j = leaseMost of its quota:
//
//   - The fault path (docs/redis.md, "When Redis cannot decide") holds a
//     key shared by n instances to L + n over a period, and to
//     L + n + n⌊L/n⌋ when Redis had answered an instance for it before
//     the fault (its twin may start from what Redis said before the
//     others spent more). Every key here took leases before the fault, so
//     each is held to left_j + n + n⌊left_j/n⌋ on every limit: Redis
//     counted preUsed before anything, so no twin starts from more than
//     left_j. The twin of several limits takes every limit down by the
//     largest quota less its share (capTwin), so a smaller limit holds
//     less than its share, or nothing: that can only refuse more (the
//     strict side), and the bound asserted is the one for each limit
//     alone.
//   - Every local admission is charged once, to every limit; a request
//     counts at most once, a refused one only when Redis ran its call
//     after the store gave up on it (its twin refused it: the strict
//     side); a grant Redis runs after the store gave up on it stays
//     counted, unspent, at most q_j a key, instance and limit. So once the
//     charges have landed and the leases are given back, what Redis
//     counts for limit j, c_j, is from preUsed + admitted to that plus
//     refused plus N × q_j, when c_j is exact (Peek cannot tell a count
//     of one below the quota from the quota). A charge takes at most what
//     is left, so where the quota was reached c_j may be as low as the
//     quota less what the leases held unspent and gave back.
//
// Traffic: every key takes leases on every store (simBusy requests on
// each, the leases lasting through the run) before the fault; then every
// store's goroutines (two for 60 keys, more for more) ask for random
// keys, half of them flooded (keys 0 and 1 of every four, so that each
// limit binds for some: limitsOutageBurst requests at a time, and asked
// for more than its bound in all), the others asked at most half of
// what their binding limit had left, spread over the run; the fault
// begins before the traffic (Redis frozen) or in its middle (CLIENT
// PAUSE), as in TestLeasesThroughOutage. Sizes: limitsOutageKeys.
func TestLeasedLimitsThroughOutage(t *testing.T) {
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.TokenBucket} {
		for _, shape := range limitsOutageShapes {
			for fi, f := range leaseSimFaults {
				t.Run(fmt.Sprintf("%s/%s/%s", alg, shape.name, f.name), func(t *testing.T) {
					srv := redistest.StartServer(t)
					admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
					t.Cleanup(func() { _ = admin.Close() })
					o := newLimitsOutage(t, srv.Addr, fmt.Sprintf("plout-%d-", fi), alg, shape.limits(alg))
					o.warm()
					o.run(f, shape.twin, srv, admin)
					o.settle()
					o.check()
				})
			}
		}
	}
}

// newLimitsOutage starts a run of alg and limits on addr, its keys'
// preUsed taken.
func newLimitsOutage(t *testing.T, addr, prefix string, alg algorithms.Algorithm, limits []algorithms.Limit) *limitsOutage {
	prefix += string(alg)
	keys := limitsOutageKeys()
	o := &limitsOutage{t: t, alg: alg, limits: limits,
		admitted: make([]atomic.Int64, keys), refused: make([]atomic.Int64, keys), asked: make([]atomic.Int64, keys)}
	o.probes = limitProbes(t, addr, prefix, alg, o.limits)
	takePreUsed(t, o.probes, o.limits, keys)
	o.stores, o.ls = leasedLimitsStores(t, addr, 3, alg, o.limits, limitsOutageTTL,
		WithPrefix(prefix), withLeaseBusy(simBusy), WithTimeout(100*time.Millisecond))
	return o
}

// allow sends key i's request to store at and counts what it decided.
func (o *limitsOutage) allow(at, i int) {
	res, err := o.ls[at].Allow(context.Background(), keyName(i), 1)
	o.asked[i].Add(1)
	switch {
	case err != nil:
		o.t.Errorf("Allow: %v", err)
	case !res.Allowed:
		o.refused[i].Add(1)
	default:
		o.admitted[i].Add(1)
		if res.Decider == algorithms.DecidedLocally {
			o.local.Add(1)
		}
	}
	if !res.Allowed && res.Decider == algorithms.DecidedLocally {
		o.twinNo.Add(1)
	}
}

// warm has every key take leases of every limit on every store, and fails
// unless every key holds units of every limit on some store.
func (o *limitsOutage) warm() {
	forEachKeyN(8, len(o.admitted), func(i int) {
		for at := range o.ls {
			for range simBusy {
				o.allow(at, i)
			}
		}
	})
	for i := range o.admitted {
		held := make([]int, len(o.limits))
		for _, l := range o.ls {
			waitLimitsUnseeking(o.t, l, keyName(i))
			for j, u := range limitsUnits(l, keyName(i)) {
				held[j] += u
			}
		}
		for j, u := range held {
			if u == 0 {
				o.t.Fatalf("%s: no store holds units of limit %d before the fault", keyName(i), j)
			}
		}
	}
}

// left is what key i's binding limit had when the test began.
func (o *limitsOutage) left(i int) int {
	return min(o.limits[0].Capacity(), o.limits[1].Capacity()-preUsed(i, o.limits[1].Rate))
}

// run sends the traffic with fault f; twin says whether the twins must
// admit some of it.
func (o *limitsOutage) run(f leaseSimFault, twin bool, srv *redistest.Server, admin *redis.Client) {
	ended := make(chan struct{})
	if f.before {
		end := f.begin(o.t, srv, admin)
		go func() { defer close(ended); end() }()
	} else {
		time.AfterFunc(leaseSimFaultAt, func() { defer close(ended); f.begin(o.t, srv, admin)() })
	}
	began := time.Now()
	keys := len(o.admitted)
	light := make([]atomic.Int64, keys)
	var wg sync.WaitGroup
	for at := range o.ls {
		for g := range keys / 30 { // as many requests a key at every size

			rng := rand.New(rand.NewPCG(uint64(at), uint64(g)))
			wg.Go(func() {
				for since := time.Duration(0); since < leaseSimLoad; since = time.Since(began) {
					i := rng.IntN(keys)
					// A light key's budget grows with the run, to half
					// what its binding limit had at its end.
					budget := int64(float64(o.left(i)/2-len(o.ls)*simBusy) * float64(since) / float64(leaseSimLoad))
					if i%4 > 1 && light[i].Add(1) > budget {
						light[i].Add(-1)
						continue
					}
					burst := 1
					if i%4 < 2 {
						burst = limitsOutageBurst
					}
					for range burst {
						o.allow(at, i)
					}
					time.Sleep(time.Duration(rng.ExpFloat64() * float64(time.Millisecond)))
				}
			})
		}
	}
	wg.Wait()
	<-ended
	// A flooded key is asked for more than its bound in all (at most
	// twice its first limit's quota, and n), however slowly a loaded
	// machine ran the load: what it fell short of is asked now.
	for i := range keys {
		for at := 0; i%4 < 2 && o.asked[i].Load() <= int64(2*o.limits[0].Capacity()+len(o.ls)); at++ {
			o.allow(at%len(o.ls), i)
		}
	}
	o.span = time.Since(began)
	if o.local.Load()+o.twinNo.Load() == 0 || twin && o.local.Load() == 0 {
		o.t.Fatalf("the twins admitted %d and refused %d: the fault did not show", o.local.Load(), o.twinNo.Load())
	}
}

// settle waits until no store owes Redis a charge and no grant is on its
// way, then has every store give its leases back.
func (o *limitsOutage) settle() {
	waitChargesLanded(o.t, o.stores)
	o.held = make([][]int, len(o.admitted))
	for i := range o.admitted {
		o.held[i] = make([]int, len(o.limits))
		for _, l := range o.ls {
			waitLimitsUnseeking(o.t, l, keyName(i))
			for j, u := range limitsUnits(l, keyName(i)) {
				o.held[i][j] += u
			}
		}
	}
	returnLeases(o.stores)
}

// check asserts, per key and limit, the fault-path bound and that Redis
// counted every admission once, with at most N × q_j more.
func (o *limitsOutage) check() {
	t, n := o.t, len(o.ls)
	beyond := make([]int64, len(o.limits)) // the most admitted less L + n
	worst := make([]int64, len(o.limits))  // the most admitted less the bound
	over := make([]int64, len(o.limits))   // the most counted less admitted
	overR := make([]int64, len(o.limits))  // and less refused
	for j := range over {
		beyond[j], worst[j], over[j], overR[j] = -1<<30, -1<<30, -1<<30, -1<<30
	}
	for i := range o.admitted {
		key, a, tightest := keyName(i), o.admitted[i].Load(), int64(1<<62)
		for j, lim := range o.limits {
			pre := int64(0)
			if j == 1 {
				pre = int64(preUsed(i, lim.Rate))
			}
			left := int64(lim.Capacity()) - pre
			if o.alg == algorithms.TokenBucket || o.alg == algorithms.LeakyBucket {
				left += (int64(lim.Rate)*int64(o.span) + int64(lim.Period) - 1) / int64(lim.Period)
			}
			bound := left + int64(n) + int64(n)*(left/int64(n))
			beyond[j], worst[j] = max(beyond[j], a-left-int64(n)), max(worst[j], a-bound)
			tightest = min(tightest, bound)
			if a > bound {
				t.Errorf("%s, limit %d: admitted %d, want at most %d (%d left + n + n⌊left/n⌋)", key, j, a, bound, left)
			}
			p, err := o.probes[j].Peek(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			if !p.Allowed || p.Remaining == 0 {
				continue // the count is L − 1 or L: not exact
			}
			c, q, r := int64(p.Limit-1-p.Remaining), int64(n*leaseMost(lim.Capacity())), o.refused[i].Load()
			over[j], overR[j] = max(over[j], c-pre-a), max(overR[j], c-pre-a-r)
			// A charge takes at most what is left, and the return then
			// takes back what the leases held: at least the quota less that.
			least := min(pre+a, int64(lim.Capacity()-o.held[i][j]))
			if c < least || c > pre+a+r+q {
				t.Errorf("%s, limit %d: Redis counted %d; %d taken before, %d admitted and %d refused, %d held unspent: want from %d to %d (N × q = %d)",
					key, j, c, pre, a, r, o.held[i][j], least, pre+a+r+q, q)
			}
		}
		if i%4 < 2 && o.asked[i].Load() <= tightest {
			t.Errorf("%s: flooded, asked %d times, want more than its bound %d", key, o.asked[i].Load(), tightest)
		}
	}
	for j, lim := range o.limits {
		t.Logf("%d keys, limit %d (quota %d, N × q = %d): the most admitted less its bound %d (less left + n: %d); "+
			"counted less admitted: at most %d (less refused too: %d)",
			len(o.admitted), j, lim.Capacity(), n*leaseMost(lim.Capacity()), worst[j], beyond[j], over[j], overR[j])
	}
	t.Logf("%d admitted and %d refused by the twins", o.local.Load(), o.twinNo.Load())
}
