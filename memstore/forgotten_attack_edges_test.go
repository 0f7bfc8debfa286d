package memstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// Attacks on strict forgetting at the end of a mark and at the edges of
// time and size; the helpers are in forgotten_attack_test.go.

// Attack 4: a key spent at the start and forgotten at once is asked for
// greedily at probes around the ends of its windows (where its mark ends).
// In no span of the window's length does it pass more than the same probes
// pass on a store that forgets nothing, and forgottenAllowance: the end of
// the mark gives it no second quota. (Forgotten after every probe, it
// passes a unit more a forgetting: attack 3.)
func TestAttackMarkEndBoundary(t *testing.T) {
	for _, alg := range algorithms.All() {
		for _, ls := range attackLimits {
			t.Run(fmt.Sprintf("%s/%s", alg, ls.name), func(t *testing.T) {
				var offsets []time.Duration
				for _, lim := range ls.limits {
					w := ratemathWindow(alg, lim)
					for k := time.Duration(0); k <= 3; k++ {
						offsets = append(offsets, k*w-time.Microsecond, k*w, k*w+time.Microsecond, k*w+w/2)
					}
				}
				offsets = sortedPositive(offsets)
				small := schedule(t, alg, ls.limits, ls.quota, offsets, true)
				ref := schedule(t, alg, ls.limits, ls.quota, offsets, false)
				for _, lim := range ls.limits {
					w := ratemathWindow(alg, lim)
					s, r := maxInSpan(small, w), maxInSpan(ref, w)
					if s > r+forgottenAllowance {
						t.Errorf("in a span of %s the forgetting store passed %d, the one that forgets nothing %d", w, s, r)
					}
				}
			})
		}
	}
}

// ratemathWindow is a limit's window, or a bucket's refill from empty.
func ratemathWindow(alg algorithms.Algorithm, l algorithms.Limit) time.Duration {
	if alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket {
		return l.Refill()
	}
	return l.Period
}

func sortedPositive(ds []time.Duration) []time.Duration {
	var out []time.Duration
	for _, d := range ds {
		if d > 0 {
			out = append(out, d)
		}
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// schedule spends a key's quota at start, forgetting it then when forget,
// then asks greedily at each offset; it returns the time of each unit
// passed.
func schedule(t *testing.T, alg algorithms.Algorithm, limits []algorithms.Limit, quota int, offsets []time.Duration, forget bool) []time.Duration {
	clock := newTestClock()
	store := must(New(WithMaxKeys(1024), WithClock(clock.Now)))
	l := mustRL(t, store, alg, limits...)
	var times []time.Duration
	at := func(d time.Duration) {
		for range greedy(t, l, "k", 4*quota) {
			times = append(times, d)
		}
	}
	at(0)
	if forget {
		forceForget(store, "k")
	}
	last := time.Duration(0)
	for _, d := range offsets {
		clock.Add(d - last)
		last = d
		at(d)
	}
	return times
}

// maxInSpan is the most times in any half-open span of length w.
func maxInSpan(times []time.Duration, w time.Duration) int {
	most := 0
	for i := range times {
		n := 0
		for j := i; j < len(times) && times[j] < times[i]+w; j++ {
			n++
		}
		most = max(most, n)
	}
	return most
}

// Attack 5: a clock that steps back an hour and forth again around a
// forgetting, huge charges, refunds and reservations, and the largest
// quota: no panic, nothing above a quota, a forgotten key held to its
// share and forgottenAllowance a forgetting. A rate of 1<<40, whose share would overflow, is refused by New.
func TestAttackClockBackAndHugeCosts(t *testing.T) {
	ctx := context.Background()
	if _, err := algorithms.New(must(New()), algorithms.FixedWindow, algorithms.Limit{Rate: 1 << 40, Period: time.Hour}); !errors.Is(err, algorithms.ErrInvalidLimit) {
		t.Errorf("a rate of 1<<40: %v, want ErrInvalidLimit", err)
	}
	for _, alg := range algorithms.All() {
		big := algorithms.MaxRate
		if alg == algorithms.SlidingWindowLog {
			big = algorithms.MaxSlidingLogRate
		}
		for _, limits := range [][]algorithms.Limit{
			{algorithms.PerMinute(10)},
			{algorithms.PerSecond(5), algorithms.PerMinute(20)},
			{{Rate: big, Period: time.Hour}},
		} {
			t.Run(fmt.Sprintf("%s/%s", alg, limits), func(t *testing.T) {
				clock := newTestClock()
				store := must(New(WithMaxKeys(1024), WithClock(clock.Now)))
				l := mustRL(t, store, alg, limits...)
				q := l.Policies()[0].Quota
				for _, p := range l.Policies() {
					q = min(q, p.Quota)
				}
				// Half the quota, forgotten: the key starts from half.
				if r, err := l.Allow(ctx, "k", q/2); err != nil || !r.Allowed {
					t.Fatalf("half the quota: %+v %v", r, err)
				}
				forceForget(store, "k")
				if r, err := l.Peek(ctx, "k"); err != nil || r.Remaining > q-q/2 {
					t.Errorf("peek of a key forgotten with %d left: %+v %v", q-q/2, r, err)
				}
				if r, err := l.Allow(ctx, "k", q-q/2+1); err != nil || r.Allowed {
					t.Errorf("more than the %d it had left: %+v %v", q-q/2, r, err)
				}
				// Spent, forgotten, and the clock an hour back: the mark
				// still holds it, through every path.
				if _, err := l.Charge(ctx, "k", q); err != nil {
					t.Fatal(err)
				}
				forceForget(store, "k")
				clock.Add(-time.Hour)
				passed := 0
				for range 3 {
					passed += greedy(t, l, "k", 2)
					if _, err := l.Charge(ctx, "k", 1<<62); err != nil {
						t.Fatal(err)
					}
					if alg.CanReserve() {
						if _, err := l.Reserve(ctx, "k", q, algorithms.MaxDelay); err != nil {
							t.Fatal(err)
						}
					}
					if r, err := l.Peek(ctx, "k"); err != nil || r.Remaining > r.Limit {
						t.Errorf("peek: %+v %v", r, err)
					}
					forceForget(store, "k")
				}
				if passed > 3*forgottenAllowance {
					t.Errorf("spent, forgotten 3 times, the clock stepped back: the key passed %d, want at most %d", passed, 3*forgottenAllowance)
				}
				greedy(t, l, "k", 1)
				if r, err := l.Refund(ctx, "k", 1<<62, 1<<62); err != nil || r.Remaining > r.Limit {
					t.Errorf("a huge refund: %+v %v", r, err)
				}
				// Forth again, past every mark: a quota, never more.
				clock.Add(3 * time.Hour)
				if r, err := l.Allow(ctx, "k", q); err != nil || !r.Allowed || r.Remaining != 0 {
					t.Errorf("a fresh quota after the marks ended: %+v %v", r, err)
				}
			})
		}
	}
}
