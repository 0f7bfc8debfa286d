package redisstore

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// Promises 1 and 2 across windows, and a hot instance beside cold ones.
// Three keys, each asked by every instance's goroutines at exponential
// gaps and in a burst of every instance the instant its window begins:
//
//   - steady (scenario 1): L a window in all at the gaps, L/2 in the
//     bursts;
//   - flood (scenario 2): 10 × L a window in all, L in the bursts;
//   - hot (scenario 3): instance 0 at 10 × L a window and L in each
//     burst, every other instance (cold) at L/(2N) and 2 in each burst.
//
// What each key is held to, window by window, never averaged:
//
//   - Fixed window: at most L admissions decided surely within a window
//     (b ≥ its start, a < its end, the window as Redis's state says it
//     was): every unit is counted in the window before it is spent, and
//     a lease ends with its window, timed on the instance from before
//     Redis read its clock. An admission straddling an edge may belong to
//     either window: it is left out, which only weakens the check by the
//     few straddling (logged).
//   - Sliding window counter: at every admission x of window k, the
//     algorithm's weighted count of the admissions surely before it,
//     cur + ⌈prev × (P − e)/P⌉ + 1 (x), is at most L, prev being the
//     admissions surely in window k − 1 and e = aₓ − start, the latest x
//     can have been decided. Sound: all those units were counted by the
//     latest grant T ≤ x among them, a grant leaves the weighted count at
//     most L, the count at T is at least theirs, and its weight at T at
//     least that at aₓ. It implies at most L a window.
//   - Buckets: any run of admissions, sorted by b, from the i-th to the
//     j-th, was decided within t = max(a) − bᵢ: at most
//     Burst + Rate × (t + ttl)/P of them (a token is spent at most ttl
//     after Redis took it).
//
// Promise 2 (under-admission) is recorded for the fixed window, not
// asserted: in each window in which a request was refused, L less the
// admissions surely or possibly in it, beside N × q. (The sliding
// counter's window admits L less the previous window's weighted part.)
// Scenario 3 asserts, for the fixed window, that a cold
// instance is not starved by the hot one's holdings: once a cold request
// is refused (Redis had no unit: the cold held none), the hot instance is
// admitted in that window only units that were counted and unspent at the
// refusal (Redis's: a denial the cache repeats may be older than a
// return), held by the instances' leases, live or ended and not yet given
// back: at most 2q per instance (a lease and its renewal), 2qN in all.
// (The sliding counter frees units within a window as the previous one's
// weight falls, so a refusal there does not bound what follows.) It logs
// what each cold instance got beside min(its demand, ⌊L/2N⌋), which the
// leases do not promise: a grant is at most what is left ÷ (holders + 1),
// and Redis counts as holders every lease granted in the last ttl and not
// given back, spent ones too, so a hot instance renewing often makes
// many more than 2N − 1 (logged).
func TestLeasesAcrossWindows(t *testing.T) {
	addr := redistest.Standalone(t)
	const L = leaseSimQuota
	// Every algorithm of a size at once, whatever -parallel says: a run
	// is mostly waiting, and its bounds do not depend on scheduling.
	for _, size := range leaseSimSizes() {
		n := float64(size.n)
		traffic := []winTraffic{
			func(int) (float64, int) { return L / n, int(math.Ceil(L / (2 * n))) },
			func(int) (float64, int) { return 10 * L / n, int(math.Ceil(L / n)) },
			func(inst int) (float64, int) {
				if inst == 0 {
					return 10 * L, L
				}
				return L / (2 * n), 2
			},
		}
		var wg sync.WaitGroup
		for _, alg := range leaseAlgorithms {
			wg.Go(func() {
				t.Run(fmt.Sprintf("N=%d/%s", size.n, alg), func(t *testing.T) {
					w := newWinSim(t, winDirect(addr), fmt.Sprintf("win-%d-%s", size.n, alg), size, alg, -1, "steady", "flood", "hot")
					w.run(winWindows*winPeriod+winPeriod/2, traffic)
					for i := range w.keys {
						w.checkLimit(i)
					}
					w.checkCold(2)
				})
			})
		}
		wg.Wait()
	}
}

// checkLimit asserts promise 1 on key i and logs its under-admission.
func (w *winSim) checkLimit(i int) {
	if w.alg != algorithms.FixedWindow && w.alg != algorithms.SlidingWindowCounter {
		w.checkSpans(i)
		return
	}
	t, L, q := w.t, leaseSimQuota, leaseMost(leaseSimQuota)
	wins := w.windows(i)
	if len(wins) < 2 {
		// Traffic that never crossed an edge: a machine loaded beyond
		// what the run can tell anything under (winWindows are meant).
		t.Errorf("%s: %d windows, want at least 2", w.keys[i], len(wins))
	}
	most, straddling, short, weighted := 0, 0, -1, 0
	for k, win := range wins {
		most, straddling = max(most, len(win.admitted)), max(straddling, win.straddling)
		if len(win.admitted) > L {
			t.Errorf("%s, window %d: %d admitted, want at most L = %d", w.keys[i], k, len(win.admitted), L)
		}
		if w.alg == algorithms.SlidingWindowCounter {
			prev := 0
			if k > 0 && wins[k-1].end == win.start {
				prev = len(wins[k-1].admitted)
			}
			weighted = max(weighted, w.checkWeighted(i, k, win, prev))
		}
		if w.alg == algorithms.FixedWindow && len(win.asked) > len(win.admitted) {
			short = max(short, L-len(win.admitted)-win.straddling)
		}
	}
	t.Logf("%s: %d windows, at most %d admitted in one (L = %d; up to %d more straddled an edge); "+
		"the sliding counter's weighted count at most %d; under-admission in a window with refusals: at most %d (N × q = %d; -1: none refused)",
		w.keys[i], len(wins), most, L, straddling, weighted, short, w.size.n*q)
}

// checkWeighted asserts the sliding counter's weighted count at each
// admission of window k, win, whose previous window admitted prev, and
// returns the largest.
func (w *winSim) checkWeighted(i, k int, win winOf, prev int) int {
	p := winPeriod.Microseconds()
	adm := slices.Clone(win.admitted)
	slices.SortFunc(adm, func(x, y winRec) int { return int(x.a - y.a) })
	most := 0
	for _, x := range adm {
		before := sort.Search(len(adm), func(j int) bool { return adm[j].a > x.b })
		e := x.a - win.start
		weighted := before + 1 + int((int64(prev)*(p-e)+p-1)/p)
		most = max(most, weighted)
		if weighted > leaseSimQuota {
			w.t.Errorf("%s, window %d, %d µs in: weighted count %d (%d before, previous window %d), want at most L = %d",
				w.keys[i], k, e, weighted, before+1, prev, leaseSimQuota)
			return most
		}
	}
	return most
}

// checkSpans asserts the buckets' bound on key i over every run of its
// admissions.
func (w *winSim) checkSpans(i int) {
	var adm []winRec
	for _, r := range w.recs[i] {
		if r.ok {
			adm = append(adm, r)
		}
	}
	slices.SortFunc(adm, func(x, y winRec) int { return int(x.b - y.b) })
	p, ttl, L := float64(winPeriod.Microseconds()), float64(winTTL.Microseconds()), float64(leaseSimQuota)
	worst := math.Inf(-1)
	for s := range adm {
		last := int64(0)
		for j := s; j < len(adm); j++ {
			last = max(last, adm[j].a)
			bound := L + L*(float64(last-adm[s].b)+ttl)/p
			worst = max(worst, float64(j-s+1)-bound)
			if float64(j-s+1) > bound {
				w.t.Errorf("%s: %d admitted within %d µs, want at most Burst + Rate × (t + ttl) = %.1f",
					w.keys[i], j-s+1, last-adm[s].b, bound)
				return
			}
		}
	}
	w.t.Logf("%s: %d admitted; the closest any span came to Burst + Rate × (t + ttl): %.1f below it", w.keys[i], len(adm), -worst)
}

// checkCold asserts, on the hot key i, that no cold instance is starved
// by the hot one's holdings (see TestLeasesAcrossWindows), and logs what
// the cold instances got beside min(demand, ⌊L/2N⌋) and the most lease
// holders Redis counted beside 2N − 1.
func (w *winSim) checkCold(i int) {
	t, n, q := w.t, w.size.n, leaseMost(leaseSimQuota)
	t.Logf("%s: at most %d live lease holders (2N − 1 = %d)", w.keys[i], w.holders[i], 2*n-1)
	if w.alg != algorithms.FixedWindow {
		return
	}
	hotAfter, deficit := -1, 0
	for k, win := range w.windows(i) {
		for c := 1; c < n; c++ {
			asked, admitted, refusedAt := 0, 0, int64(math.MaxInt64)
			for _, r := range win.asked {
				if r.inst != c {
					continue
				}
				asked++
				if r.ok {
					admitted++
				} else if !r.cached {
					refusedAt = min(refusedAt, r.a)
				}
			}
			deficit = max(deficit, min(asked, leaseSimQuota/(2*n))-admitted)
			if refusedAt == math.MaxInt64 {
				continue
			}
			after := 0
			for _, r := range win.admitted {
				if r.inst == 0 && r.b > refusedAt {
					after++
				}
			}
			hotAfter = max(hotAfter, after)
			if after > 2*q*n {
				t.Errorf("%s, window %d: cold instance %d refused, then the hot one admitted %d more, want at most 2qN = %d",
					w.keys[i], k, c, after, 2*q*n)
			}
		}
	}
	t.Logf("%s: after a cold instance's refusal the hot one was admitted at most %d more in the window (2qN = %d; -1: no cold refusal); "+
		"a cold instance got at most %d less than min(its demand, ⌊L/2N⌋ = %d) in a window",
		w.keys[i], hotAfter, 2*q*n, deficit, leaseSimQuota/(2*n))
}
