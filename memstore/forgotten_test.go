package memstore

import (
	"context"
	"fmt"
	"testing"
	"time"

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
	for _, alg := range algorithms.All() {
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

// Honest churn fills a store: 40,000 clients a millisecond apart, each
// asking once, into 4,096 entries. A newcomer is held by a mark only when
// its bit collides with a forgotten key's in its slot, so most of the last
// 2,000 clients find their whole quota, and every one of them passes at
// least once: forgettings do not compound from one newcomer to the next
// (without the bits, the marks of one-request clients ran each slot down
// to the one-unit floor, and no newcomer found its quota).
func TestForgettingSparesNewcomers(t *testing.T) {
	const capacity, clients, last, quota = 4096, 40_000, 2_000, 10
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			clock := newTestClock()
			store := must(New(WithMaxKeys(capacity), WithClock(clock.Now)))
			l := mustNew(t, store, alg, algorithms.PerMinute(quota))
			ctx := context.Background()
			whole := 0
			for i := range clients {
				clock.Add(time.Millisecond)
				key := fmt.Sprint("client", i)
				r, err := l.Allow(ctx, key, 1)
				if err != nil {
					t.Fatal(err)
				}
				if i < clients-last {
					continue
				}
				if !r.Allowed {
					t.Fatalf("newcomer %d refused its first request: %+v", i, r)
				}
				if r.Remaining == quota-1 {
					whole++
				}
			}
			t.Logf("%d of the last %d newcomers found their whole quota", whole, last)
			if whole < last/2 {
				t.Errorf("%d of the last %d newcomers found their whole quota, want at least half", whole, last)
			}
		})
	}
}
