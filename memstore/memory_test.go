package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// The memory store's bounds: its size, what it forgets at the bound, its
// bytes per entry, the memory it gives back, and the work a request does
// for housekeeping. The byte counts are measured on the Go heap.

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: start} }

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *testClock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// heapAlloc is the live heap after a full collection.
func heapAlloc() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// ipKey is a 9 to 15 byte key like a client address.
func ipKey(i int) string { return fmt.Sprintf("203.%d.%d.%d", i>>16&255, i>>8&255, i&255) }

func (s *Store) shardOf(key string) *memoryShard {
	return &s.shards[maphash.String(s.seed, key)&uint64(len(s.shards)-1)]
}

// keysInShard returns n keys that land in the same shard as key.
func keysInShard(s *Store, key string, n int) []string {
	want := s.shardOf(key)
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if k := fmt.Sprint("k", i); s.shardOf(k) == want {
			keys = append(keys, k)
		}
	}
	return keys
}

func mustNew(t testing.TB, store algorithms.Store, alg algorithms.Algorithm, limits ...algorithms.Limit) algorithms.Limiter {
	t.Helper()
	l, err := algorithms.New(store, alg, limits...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestMemoryShardsAndDefaults(t *testing.T) {
	tests := []struct {
		opts             []Option
		shards, shardCap int
	}{
		{nil, 64, DefaultMaxKeys / 64},
		{[]Option{WithMaxKeys(1024)}, 64, 16},
		{[]Option{WithMaxKeys(16 << 20)}, 1024, 16384},
		{[]Option{WithMaxKeys(math.MaxInt)}, maxShards, math.MaxInt32},
	}
	for _, tt := range tests {
		s, err := New(tt.opts...)
		if err != nil || len(s.shards) != tt.shards || s.shardCap != tt.shardCap {
			t.Fatalf("%v: %v, err %v; want %d shards of %d", tt.opts, s, err, tt.shards, tt.shardCap)
		}
	}
}

// Four goroutines adding distinct keys never take the store past its bound.
func TestMemoryCapHolds(t *testing.T) {
	const maxKeys = 4096 // 64 per shard: the bound is exact
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			store := must(New(WithMaxKeys(maxKeys)))
			l := mustNew(t, store, alg, algorithms.PerMinute(5), algorithms.PerHour(50))
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					for i := range 5000 {
						if r, err := l.Allow(context.Background(), fmt.Sprint(g, "/", i), 1); err != nil || !r.Allowed {
							t.Errorf("Allow: %+v, %v", r, err)
							return
						}
						if i%500 == 0 {
							if n := store.Len(); n > maxKeys {
								t.Errorf("%d entries, bound %d", n, maxKeys)
							}
						}
					}
				})
			}
			wg.Wait()
			if n := store.Len(); n > maxKeys || n < maxKeys*3/4 {
				t.Fatalf("%d entries after 40,000 inserts, want at most %d and most of it used", n, maxKeys)
			}
		})
	}
}

// At the bound a shard forgets expired entries first, then fresh ones, and
// keeps an exhausted key whose forgetting would hand its client a quota.
func TestMemoryEvictsNearestToFresh(t *testing.T) {
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			clock := newTestClock()
			store := must(New(WithMaxKeys(1024), WithClock(clock.Now))) // 16 per shard
			ctx := context.Background()
			l := mustNew(t, store, alg, algorithms.PerMinute(10))
			short := mustNew(t, store, alg, algorithms.PerSecond(10))
			sh := store.shardOf("victim")
			keys := keysInShard(store, "victim", 300)

			if r, _ := l.Allow(ctx, "victim", 10); !r.Allowed {
				t.Fatalf("the whole quota at once: %+v", r)
			}
			// 15 entries that will expire fill the shard with the victim.
			for _, k := range keys[:15] {
				if r, _ := short.Allow(ctx, k, 1); !r.Allowed {
					t.Fatal(r)
				}
			}
			clock.Add(2 * time.Second) // past the short limit's expiry
			for _, k := range keys[15:30] {
				if r, _ := l.Allow(ctx, k, 1); !r.Allowed {
					t.Fatal(r)
				}
			}
			sh.mu.Lock()
			expiredLeft, fresh := len(sh.tables), sh.count
			sh.mu.Unlock()
			if expiredLeft != 1 || fresh != 16 {
				t.Fatalf("%d tables and %d entries after 15 new keys in a shard of expired ones; want only the live limit's 16", expiredLeft, fresh)
			}
			// Light churn: a new key every 10ms, each one forgetting another.
			for _, k := range keys[30:] {
				clock.Add(10 * time.Millisecond)
				if r, _ := l.Allow(ctx, k, 1); !r.Allowed {
					t.Fatal(r)
				}
			}
			if r, _ := l.Allow(ctx, "victim", 1); r.Allowed {
				t.Fatalf("the exhausted key was forgotten among %d fresh ones: %+v", len(keys)-30, r)
			}
			sh.mu.Lock()
			defer sh.mu.Unlock()
			if sh.count != 16 {
				t.Fatalf("%d entries in a shard of 16", sh.count)
			}
		})
	}
}

// Bytes per entry, key included, over 200,000 keys of one limit.
func TestMemoryBytesPerEntry(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap over 200,000 keys")
	}
	const n = 200_000
	tests := []struct {
		alg algorithms.Algorithm
		max float64
	}{
		{algorithms.FixedWindow, 110},
		{algorithms.SlidingWindowCounter, 110},
		{algorithms.TokenBucket, 110},
		{algorithms.LeakyBucket, 110},
		{algorithms.SlidingWindowLog, 170}, // plus a ring of times
	}
	for _, tt := range tests {
		t.Run(string(tt.alg), func(t *testing.T) {
			store := must(New())
			l := mustNew(t, store, tt.alg, algorithms.PerMinute(100))
			base := heapAlloc()
			for i := range n {
				if _, err := l.Allow(context.Background(), ipKey(i), 1); err != nil {
					t.Fatal(err)
				}
			}
			per := float64(heapAlloc()-base) / n
			runtime.KeepAlive(store)
			t.Logf("%.1f bytes per entry", per)
			if per > tt.max {
				t.Fatalf("%.1f bytes per entry, want at most %.0f", per, tt.max)
			}
		})
	}
}

// housekeepAll makes requests on keys spread over every shard, at the same
// time, until the store holds at most want entries; it returns the rounds.
func housekeepAll(t *testing.T, store *Store, l algorithms.Limiter, want int) int {
	t.Helper()
	for round := 1; round <= 200; round++ {
		for i := range 1024 {
			if _, err := l.Allow(context.Background(), fmt.Sprint("later", i), 1); err != nil {
				t.Fatal(err)
			}
		}
		if store.Len() <= want {
			return round
		}
	}
	t.Fatalf("%d entries left after 200 rounds of housekeeping", store.Len())
	return 0
}

// After a flood of keys goes quiet, the entries go and so does their memory.
func TestMemoryReturnsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap over 200,000 keys")
	}
	clock := newTestClock()
	store := must(New(WithClock(clock.Now)))
	l := mustNew(t, store, algorithms.FixedWindow, algorithms.PerMinute(100))
	base := heapAlloc()
	for i := range 200_000 {
		if _, err := l.Allow(context.Background(), ipKey(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	peak := heapAlloc() - base
	clock.Add(2 * time.Minute) // past the windows and the sweep interval
	rounds := housekeepAll(t, store, l, 1024)
	left := heapAlloc() - base
	t.Logf("flood %d KiB, %d KiB after %d rounds of 1024 requests", peak>>10, left>>10, rounds)
	if left > peak/50 {
		t.Fatalf("%d KiB held by 1024 keys, after %d KiB for 200,000", left>>10, peak>>10)
	}
}

// 10,000 limits, each used once, leave nothing behind once they expire.
func TestMemoryDropsEmptyLimits(t *testing.T) {
	clock := newTestClock()
	store := must(New(WithClock(clock.Now)))
	limiters := make([]algorithms.Limiter, 10_000)
	for i := range limiters {
		limiters[i] = mustNew(t, store, algorithms.FixedWindow, algorithms.Limit{Rate: 10 + i, Period: time.Minute})
	}
	base := heapAlloc()
	for i, l := range limiters {
		if _, err := l.Allow(context.Background(), fmt.Sprint("tenant", i), 1); err != nil {
			t.Fatal(err)
		}
	}
	used := heapAlloc() - base
	clock.Add(2 * time.Minute)
	housekeepAll(t, store, limiters[0], 1024)
	tables := 0
	for i := range store.shards {
		sh := &store.shards[i]
		sh.mu.Lock()
		tables += len(sh.list)
		sh.mu.Unlock()
	}
	left := heapAlloc() - base
	runtime.KeepAlive(limiters)
	t.Logf("%d KiB for 10,000 limits, %d KiB and %d tables after they expired", used>>10, left>>10, tables)
	if tables > len(store.shards) || left > 512<<10 {
		t.Fatalf("%d tables and %d KiB left for one limit's 1024 keys", tables, left>>10)
	}
}

// A request examines at most sweepChunk entries, or rebuilds one table at a
// cost of its live entries, however large the shard.
func TestMemoryHousekeepingIsBounded(t *testing.T) {
	const total, live = 50_000, 10_000
	seed := maphash.MakeSeed()
	p := ratemath.ParamsFor(algorithms.FixedWindow, algorithms.PerMinute(10))
	var sh memoryShard
	t0 := start.UnixMicro()
	for i := range total {
		now := t0
		if i < live {
			now += 30e6 // these windows end 30s after the others
		}
		key := ipKey(i)
		_, e := ratemath.Entry{}.Check(algorithms.FixedWindow, now, p, 1)
		e.Commit(algorithms.FixedWindow, now, p, 1)
		sh.insert(seed, 0, algorithms.FixedWindow, p, key, tagOf(maphash.String(seed, key)), &e, now, math.MaxInt)
	}
	now := t0 + 61e6 // the first windows have ended
	calls, rebuilds := 0, 0
	for {
		work := sh.housekeep(now, 60e6)
		calls++
		switch {
		case work > sweepChunk+live:
			t.Fatalf("call %d did %d units of work", calls, work)
		case work > sweepChunk:
			rebuilds++
		}
		if !sh.sweeping {
			break
		}
	}
	t.Logf("%d calls for a pass over %d entries", calls, total)
	if sh.count != live || rebuilds != 1 || sh.list[0].peak != live || calls > total/sweepChunk+2 {
		t.Fatalf("%d entries left, %d rebuilds, peak %d, %d calls", sh.count, rebuilds, sh.list[0].peak, calls)
	}
}

// The index against a Go map, through adds, moves and removals that shift
// slots back. Tags of 10 bits make long runs of colliding slots.
func TestMemoryIndex(t *testing.T) {
	seed := maphash.MakeSeed()
	tag := func(k string) uint32 { return tagOf(maphash.String(seed, k)) & 0x3ff }
	var x index
	var ents []slot
	want := map[string]int{}
	check := func(step int) {
		for k, j := range want {
			if got := x.lookup(tag(k), k, ents); got != j {
				t.Fatalf("step %d: %q at %d, want %d", step, k, got, j)
			}
		}
		if x.n != len(want) || x.lookup(tag("absent"), "absent", ents) != -1 {
			t.Fatalf("step %d: %d keys, want %d", step, x.n, len(want))
		}
	}
	for step := range 5000 {
		if step%3 == 2 && len(ents) > 0 {
			// Remove as the table does: the last entry fills the hole.
			j := (step * 7919) % len(ents)
			k, last := ents[j].key, len(ents)-1
			x.remove(tag(k), k, ents)
			delete(want, k)
			if j != last {
				x.move(tag(ents[last].key), ents[last].key, j, ents)
				ents[j] = ents[last]
				want[ents[j].key] = j
			}
			ents = ents[:last]
		} else {
			k := fmt.Sprint(step)
			x.add(tag(k), k, len(ents), ents)
			ents = append(ents, slot{key: k})
			want[k] = len(ents) - 1
		}
		if step%250 == 0 {
			check(step)
		}
	}
	check(5000)
	x.fit()
	check(5001)
}

// A typed nil memory limiter cannot reserve: its Algorithm is none.
func TestCanReserveNilMemoryLimiter(t *testing.T) {
	if (*memoryLimiter)(nil).Algorithm().CanReserve() {
		t.Fatal("Algorithm().CanReserve of a nil memory limiter")
	}
}
