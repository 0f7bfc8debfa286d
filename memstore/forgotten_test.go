package memstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
)

// An attacker with four times as many identities as the store holds
// entries spends each identity's quota, then asks again with each within
// the same window: every identity the full store forgot starts from what it
// had left (at least forgottenAllowance), so none passes more than its
// quota and one unit, under one limit or two. A key never seen before, in
// a store that forgot thousands of exhausted ones, still passes.
func TestForgettingGivesNoFreshQuota(t *testing.T) {
	const capacity, identities, quota = 1024, 4 * 1024, 10
	for _, alg := range algorithms.Algorithms {
		for _, limits := range [][]algorithms.Limit{
			{algorithms.PerMinute(quota)},
			{algorithms.PerMinute(quota), algorithms.PerHour(3 * quota)},
		} {
			t.Run(fmt.Sprintf("%s/%d limits", alg, len(limits)), func(t *testing.T) {
				clock := newTestClock() // still: no window ends, no bucket refills
				store := must(New(WithMaxKeys(capacity), WithClock(clock.Now)))
				l := mustNew(t, store, alg, limits...)
				ctx := context.Background()
				passed := make([]int, identities)
				for round := range 2 {
					for i := range identities {
						for range quota {
							r, err := l.Allow(ctx, fmt.Sprint("id", i), 1)
							if err != nil {
								t.Fatal(err)
							}
							if r.Allowed {
								passed[i]++
							}
						}
					}
					t.Logf("after round %d: %d entries held", round+1, store.entries())
				}
				over, worst := 0, 0
				for _, n := range passed {
					if n > quota+forgottenAllowance {
						over++
					}
					worst = max(worst, n)
				}
				if over > 0 {
					t.Errorf("%d of %d identities passed more than %d (the quota and %d), up to %d", over, identities, quota+forgottenAllowance, forgottenAllowance, worst)
				}
				if r, err := l.Allow(ctx, "newcomer", 1); err != nil || !r.Allowed {
					t.Errorf("a key never seen before: %+v %v, want admitted", r, err)
				}
			})
		}
	}
}

// entries is how many entries the store holds.
func (s *Store) entries() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.count
		sh.mu.Unlock()
	}
	return n
}
