package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// Attacks on strict forgetting (forgotten.go), as a hostile client makes
// them: keys that share a mark slot, Reset and Refund, a key cycled through
// eviction many times a window, the end of a mark, a clock that steps back
// and huge limits. Every bound is asserted per identity.

// attackLimits are the limiters attacked: one limit, and two. quota is the
// least quota: what a key may pass in a burst.
var attackLimits = []struct {
	name   string
	limits []algorithms.Limit
	quota  int
	span   time.Duration // the longest window or refill
}{
	{"PerMinute(10)", []algorithms.Limit{algorithms.PerMinute(10)}, 10, time.Minute},
	{"PerSecond(5)+PerMinute(20)", []algorithms.Limit{algorithms.PerSecond(5), algorithms.PerMinute(20)}, 5, time.Minute},
}

func mustRL(t testing.TB, store *Store, alg algorithms.Algorithm, limits ...algorithms.Limit) algorithms.RateLimiter {
	t.Helper()
	l, err := algorithms.New(store, alg, limits...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// slotOf returns key's shard and mark slot, as evict and start compute
// them.
func slotOf(s *Store, key string) (shard int, slot uint32) {
	h := maphash.String(s.seed, key)
	n := 1 << bits.Len(uint(max(64, s.shardCap/4)-1))
	return int(h & uint64(len(s.shards)-1)), tagOf(h) & uint32(n-1)
}

// colliding returns n keys other than key in key's shard and mark slot.
func colliding(s *Store, key string, n int) []string {
	sh, slot := slotOf(s, key)
	var keys []string
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprint("c", i)
		if ksh, kslot := slotOf(s, k); k != key && ksh == sh && kslot == slot {
			keys = append(keys, k)
		}
	}
	return keys
}

// forceForget makes key's full shard forget key's entries under every
// limit, as its eviction does when it picks them: what an attacker's flood
// of new keys achieves, done at once. It returns the entries forgotten.
func forceForget(s *Store, key string) int {
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now, n := s.now(), 0
	for i := 0; i < len(sh.list); {
		t := sh.list[i]
		if j := t.index.lookup(t.tag(key), key, t.ents); j >= 0 {
			n++
			if sh.forget(t, j, now, s.shardCap) {
				continue // the last table took t's place
			}
		}
		i++
	}
	return n
}

// greedy asks for key one unit at a time until it is denied (or most
// units pass) and returns how many passed.
func greedy(t testing.TB, l algorithms.Limiter, key string, most int) int {
	t.Helper()
	n := 0
	for n < most {
		r, err := l.Allow(context.Background(), key, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Allowed {
			break
		}
		n++
	}
	return n
}

// Attack 3, by behaviour alone: twice as many identities as their shard
// holds, each asked for round after round within one window, the clock a
// µs later each time, so that the full shard forgets one spent entry for
// each new one. An identity has an entry only after its own visit, so it
// is forgotten at most once between visits, and each forgetting gives it at
// most forgottenAllowance: it passes at most its quota and that for every
// round after the first. That is the bound that holds, and it grows with
// the rounds, not the window: every identity is forgotten every round and
// passes 109 of a quota of 10 in 3.2 ms (see the log).
func TestAttackCyclingThroughEvictionOneShard(t *testing.T) {
	const rounds = 100
	for _, alg := range algorithms.All() {
		for _, ls := range attackLimits {
			t.Run(fmt.Sprintf("%s/%s", alg, ls.name), func(t *testing.T) {
				clock := newTestClock()
				store := must(New(WithMaxKeys(1024), WithClock(clock.Now)))
				l := mustRL(t, store, alg, ls.limits...)
				keys := keysInShard(store, "cycle", 2*store.shardCap)
				passed := make([]int, len(keys))
				for range rounds {
					for i, k := range keys {
						clock.Add(time.Microsecond)
						passed[i] += greedy(t, l, k, ls.quota+rounds)
					}
				}
				bound := ls.quota + (rounds-1)*forgottenAllowance
				least, worst, over := passed[0], 0, 0
				for _, n := range passed {
					least, worst = min(least, n), max(worst, n)
					if n > bound {
						over++
					}
				}
				t.Logf("%d identities, %d rounds in %s: each passed %d to %d of a quota of %d", len(keys), rounds, time.Duration(rounds*len(keys))*time.Microsecond, least, worst, ls.quota)
				if over > 0 {
					t.Errorf("%d of %d identities passed more than %d (the quota and one unit a forgetting), up to %d", over, len(keys), bound, worst)
				}
			})
		}
	}
}

// Attack 3 at scale: 16,384 identities against 1,024 entries, each asked
// for its whole (small) quota in each of 3 rounds of a still clock (one
// window):
// every identity passes at most its quota and forgottenAllowance for each
// round after the first (it is forgotten at most once between its visits).
func TestAttackCyclingThroughEvictionAtScale(t *testing.T) {
	const capacity, identities, rounds = 1024, 16 * 1024, 3
	for _, alg := range algorithms.All() {
		for _, ls := range []struct {
			name   string
			limits []algorithms.Limit
			quota  int
		}{
			{"PerMinute(3)", []algorithms.Limit{algorithms.PerMinute(3)}, 3},
			{"PerSecond(2)+PerMinute(6)", []algorithms.Limit{algorithms.PerSecond(2), algorithms.PerMinute(6)}, 2},
		} {
			if len(ls.limits) > 1 && alg != algorithms.FixedWindow && alg != algorithms.LeakyBucket {
				continue // two limits: a window and a bucket, to keep the package fast
			}
			t.Run(fmt.Sprintf("%s/%s", alg, ls.name), func(t *testing.T) {
				clock := newTestClock()
				store := must(New(WithMaxKeys(capacity), WithClock(clock.Now)))
				l := mustRL(t, store, alg, ls.limits...)
				passed := make([]int, identities)
				for range rounds {
					for i := range identities {
						passed[i] += greedy(t, l, ipKey(i), ls.quota+1)
					}
				}
				bound := ls.quota + (rounds-1)*forgottenAllowance
				worst, over, extra := 0, 0, 0
				for _, n := range passed {
					worst = max(worst, n)
					if n > bound {
						over++
					}
					if n > ls.quota+forgottenAllowance {
						extra++
					}
				}
				t.Logf("%d of %d identities passed more than the quota and one unit in one window, up to %d", extra, identities, worst)
				if over > 0 {
					t.Errorf("%d of %d identities passed more than %d in one window, up to %d", over, identities, bound, worst)
				}
			})
		}
	}
}

// Attack 1: an attacker key spends its quota and is forgotten, again and
// again, each window, before the keys that share its mark slot ask. Each
// of them passes at least forgottenAllowance every window, never locked
// out; the attacker passes at most its quota and forgottenAllowance a
// forgetting: the quota and 50 units a window when it has itself forgotten
// 50 times (see attack 3).
func TestAttackCollidingKeys(t *testing.T) {
	const windows, cycles = 4, 50
	for _, alg := range algorithms.All() {
		for _, ls := range attackLimits {
			t.Run(fmt.Sprintf("%s/%s", alg, ls.name), func(t *testing.T) {
				clock := newTestClock()
				store := must(New(WithMaxKeys(1024), WithClock(clock.Now)))
				l := mustRL(t, store, alg, ls.limits...)
				attacker := "attacker"
				victims := colliding(store, attacker, 4)
				for w := range windows {
					// Every mark of the last window has ended: its entries
					// were all fresh within two spans.
					clock.Add(2*ls.span + time.Millisecond)
					got, forgot := greedy(t, l, attacker, ls.quota+cycles), 0
					for range cycles {
						if forceForget(store, attacker) > 0 {
							forgot++
						}
						clock.Add(time.Microsecond)
						got += greedy(t, l, attacker, ls.quota+cycles)
					}
					if got > ls.quota+forgot*forgottenAllowance {
						t.Errorf("window %d: the attacker, forgotten %d times, passed %d, want at most %d", w, forgot, got, ls.quota+forgot*forgottenAllowance)
					}
					if w == 0 {
						t.Logf("the attacker, forgotten %d times in a window, passed %d of a quota of %d", forgot, got, ls.quota)
					}
					for _, v := range victims {
						if n := greedy(t, l, v, ls.quota+1); n < forgottenAllowance || n > ls.quota {
							t.Errorf("window %d: %s, sharing the attacker's slot, passed %d, want %d to %d", w, v, n, forgottenAllowance, ls.quota)
						}
					}
				}
			})
		}
	}
}

// Attack 1 across limiters: marks are per slot, not per limit, so an
// attacker key spent and forgotten under a per-second limiter leaves a
// mark that a victim of its slot under another limiter, of an hour, starts
// from. The victim still passes at least forgottenAllowance, and its own
// entry then holds it for its own window: under the window algorithms one
// unit of 1,000 in the hour, the buckets refilling at their rate (see the
// log); stricter by up to one of its periods, as forgotten.go says, so a
// second's mark costs a window victim an hour's quota.
func TestAttackCollidingAcrossLimiters(t *testing.T) {
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			clock := newTestClock()
			store := must(New(WithMaxKeys(1024), WithClock(clock.Now)))
			short := mustRL(t, store, alg, algorithms.PerSecond(5))
			long := mustRL(t, store, alg, algorithms.PerHour(1000))
			attacker := "attacker"
			victim := colliding(store, attacker, 1)[0]
			greedy(t, short, attacker, 10)
			forceForget(store, attacker)
			n := greedy(t, long, victim, 1000)
			clock.Add(2 * time.Second) // the attacker's mark has ended
			later := greedy(t, long, victim, 1000)
			clock.Add(30 * time.Minute)
			half := greedy(t, long, victim, 1000)
			t.Logf("the victim passed %d of 1000 while a 1s mark lasted, %d more 2s later, %d more half an hour later", n, later, half)
			if n < forgottenAllowance || n+later > 1000 {
				t.Errorf("the victim passed %d then %d of 1000, want at least %d and at most the quota", n, later, forgottenAllowance)
			}
			clock.Add(2 * time.Hour)
			if got := greedy(t, long, victim, 1000); got != 1000 {
				t.Errorf("two hours later the victim passed %d, want 1000", got)
			}
		})
	}
}

// Attack 2: Reset and Refund on keys of a marked slot. Neither gives more
// than a fresh quota; Reset and Refund of other keys do not undo the marks
// the attacker's forgetting left; a Refund of a key with no entry stores
// nothing.
func TestAttackResetRefundInMarkedSlot(t *testing.T) {
	ctx := context.Background()
	for _, alg := range algorithms.All() {
		for _, ls := range attackLimits {
			t.Run(fmt.Sprintf("%s/%s", alg, ls.name), func(t *testing.T) {
				clock := newTestClock()
				store := must(New(WithMaxKeys(1024), WithClock(clock.Now)))
				l := mustRL(t, store, alg, ls.limits...)
				a := "attacker"
				others := colliding(store, a, 2)
				got := greedy(t, l, a, 2*ls.quota)
				forceForget(store, a)
				clock.Add(time.Millisecond)
				// Others of the slot reset, refund with no entry, and
				// refund after one unit.
				before := store.entries()
				for _, v := range others {
					if err := l.Reset(ctx, v); err != nil {
						t.Fatal(err)
					}
					if _, err := l.Refund(ctx, v, 1<<30, time.Hour); err != nil {
						t.Fatal(err)
					}
				}
				if n := store.entries(); n != before {
					t.Errorf("a reset and a refund of keys with no entry left %d entries, want %d", n, before)
				}
				for _, v := range others {
					greedy(t, l, v, 1)
					if _, err := l.Refund(ctx, v, 1<<30, time.Hour); err != nil {
						t.Fatal(err)
					}
					if err := l.Reset(ctx, v); err != nil {
						t.Fatal(err)
					}
				}
				got += greedy(t, l, a, 2*ls.quota)
				if got > ls.quota+forgottenAllowance {
					t.Errorf("after others of its slot reset and refunded, the attacker passed %d in the window, want at most %d", got, ls.quota+forgottenAllowance)
				}
				// The attacker's own Reset: a quota at most, whatever
				// the mark.
				if err := l.Reset(ctx, a); err != nil {
					t.Fatal(err)
				}
				if n := greedy(t, l, a, 2*ls.quota); n > ls.quota {
					t.Errorf("after a reset the attacker passed %d, more than a quota (%d)", n, ls.quota)
				} else {
					t.Logf("after its reset, in the marked slot, the attacker passed %d of a quota of %d", n, ls.quota)
				}
				// Its own Refund of everything: a quota at most, and
				// Peek never says more.
				if _, err := l.Refund(ctx, a, 1<<30, 0); err != nil {
					t.Fatal(err)
				}
				if r, err := l.Peek(ctx, a); err != nil || r.Remaining > r.Limit {
					t.Errorf("peek after a refund: %+v %v", r, err)
				}
				if n := greedy(t, l, a, 2*ls.quota); n > ls.quota {
					t.Errorf("after a refund of all, the attacker passed %d, more than a quota (%d)", n, ls.quota)
				}
			})
		}
	}
}
