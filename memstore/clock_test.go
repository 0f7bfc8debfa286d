package memstore

import (
	"context"
	"hash/maphash"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// The memory store reads the clock under the key's shard lock, so a
// request that waited for the lock decides at the time it got it, never
// at the earlier time it arrived: decisions on one key see time in the
// order they are made.
func TestMemoryReadsClockUnderLock(t *testing.T) {
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			var store *Store
			var outside atomic.Int32
			clock := func() time.Time {
				// Called by the test's one goroutine: the lock is taken
				// exactly when this goroutine holds it.
				if store != nil {
					sh := &store.shards[maphash.String(store.seed, "k")&uint64(len(store.shards)-1)]
					if sh.mu.TryLock() {
						sh.mu.Unlock()
						outside.Add(1)
					}
				}
				return start
			}
			store = must(New(WithClock(clock)))
			l, err := algorithms.New(store, alg, algorithms.PerMinute(10))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for range 3 {
				if _, err := l.Allow(ctx, "k", 1); err != nil {
					t.Fatal(err)
				}
				if _, err := l.Peek(ctx, "k"); err != nil {
					t.Fatal(err)
				}
			}
			if n := outside.Load(); n != 0 {
				t.Fatalf("the clock was read %d times outside the key's lock", n)
			}
		})
	}
}

// Under contention, each decision's time (read back from its ResetAfter in
// a fixed window) grows with the order the decisions were made in (read
// back from Remaining): no request decides with a time older than the one
// before it.
func TestMemoryTimeFollowsDecisionOrder(t *testing.T) {
	var ticks atomic.Int64
	clock := func() time.Time {
		// Every read is a microsecond later, and slow, so that requests
		// that read the clock and then queue for the lock would be seen.
		now := start.Add(time.Duration(ticks.Add(1)) * time.Microsecond)
		time.Sleep(20 * time.Microsecond)
		return now
	}
	const n = 200
	l, err := algorithms.New(must(New(WithClock(clock))), algorithms.FixedWindow, algorithms.PerMinute(n))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var results []algorithms.Result
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			r, err := l.Allow(context.Background(), "k", 1)
			if err != nil || !r.Allowed {
				t.Errorf("Allow: %+v, %v", r, err)
				return
			}
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
		})
	}
	wg.Wait()
	// Made in order of falling Remaining; each at window end - ResetAfter.
	sort.Slice(results, func(i, j int) bool { return results[i].Remaining > results[j].Remaining })
	for i := 1; i < len(results); i++ {
		if results[i].ResetAfter >= results[i-1].ResetAfter {
			t.Fatalf("decision %d was made at an older or equal time than decision %d (ResetAfter %s after %s)",
				i, i-1, results[i].ResetAfter, results[i-1].ResetAfter)
		}
	}
}
