package memstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// held reports the unexpired leases key holds, for tests.
func (m *memoryConcurrency) held(key string) int {
	st := m.state
	sh := st.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.keys[key]
	if e == nil {
		return 0
	}
	now := st.clock().UnixMicro()
	n := 0
	for _, exp := range e.leases {
		if exp > now {
			n++
		}
	}
	return n
}

// entries reports how many keys hold an entry, for tests.
func (st *concurrencyState) entries() int {
	n := 0
	for i := range st.shards {
		sh := &st.shards[i]
		sh.mu.Lock()
		n += len(sh.keys)
		sh.mu.Unlock()
	}
	return n
}

func mustConcurrency(t testing.TB, store algorithms.Store, limit int, lease time.Duration, opts ...algorithms.ConcurrencyOption) algorithms.ConcurrencyLimiter {
	t.Helper()
	l, err := algorithms.NewConcurrency(store, limit, lease, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustAcquire(t testing.TB, l algorithms.ConcurrencyLimiter, key string) *algorithms.Lease {
	t.Helper()
	lease, err := l.Acquire(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

// Misconfiguration is refused at construction, with the sentinel it is
// documented to wrap; bad keys are refused by Acquire.
func TestConcurrencyInvalid(t *testing.T) {
	mem := must(New())
	var nilMem *Store
	for _, tc := range []struct {
		name  string
		store algorithms.Store
		limit int
		lease time.Duration
		opts  []algorithms.ConcurrencyOption
		want  error
	}{
		{"limit 0", mem, 0, time.Second, nil, algorithms.ErrInvalidLimit},
		{"limit negative", mem, -3, time.Second, nil, algorithms.ErrInvalidLimit},
		{"limit too large", mem, algorithms.MaxConcurrency + 1, time.Second, nil, algorithms.ErrInvalidLimit},
		{"lease 0", mem, 1, 0, nil, algorithms.ErrInvalidLimit},
		{"lease negative", mem, 1, -time.Second, nil, algorithms.ErrInvalidLimit},
		{"lease under a millisecond", mem, 1, 500 * time.Microsecond, nil, algorithms.ErrInvalidLimit},
		{"lease over a day", mem, 1, 25 * time.Hour, nil, algorithms.ErrInvalidLimit},
		{"lease not in whole microseconds", mem, 1, time.Second + 1, nil, algorithms.ErrInvalidLimit},
		{"nil store", nil, 1, time.Second, nil, algorithms.ErrInvalidOption},
		{"typed nil store", nilMem, 1, time.Second, nil, algorithms.ErrInvalidOption},
		{"zero store", &Store{}, 1, time.Second, nil, algorithms.ErrInvalidOption},
		{"nil option", mem, 1, time.Second, []algorithms.ConcurrencyOption{nil}, algorithms.ErrInvalidOption},
		{"retry-after 0", mem, 1, time.Second, []algorithms.ConcurrencyOption{algorithms.WithConcurrencyRetryAfter(0)}, algorithms.ErrInvalidOption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := algorithms.NewConcurrency(tc.store, tc.limit, tc.lease, tc.opts...)
			if !errors.Is(err, tc.want) || l != nil {
				t.Fatalf("got %v, %v; want an error wrapping %v", l, err, tc.want)
			}
		})
	}
	l := mustConcurrency(t, mem, 1, time.Second)
	for _, key := range []string{"", strings.Repeat("k", algorithms.MaxKeyLength+1)} {
		if lease, err := l.Acquire(context.Background(), key); !errors.Is(err, algorithms.ErrInvalidKey) || lease != nil {
			t.Errorf("key of %d bytes: %v, %v; want algorithms.ErrInvalidKey", len(key), lease, err)
		}
	}
	if lease := mustAcquire(t, l, strings.Repeat("k", algorithms.MaxKeyLength)); !lease.Allowed {
		t.Error("a key of algorithms.MaxKeyLength bytes was not admitted")
	}
}

// The memory store's semantics, step by step on a manual clock.
func TestMemoryConcurrency(t *testing.T) {
	clock := storetest.NewManualClock(start)
	store := must(New(WithClock(clock.Now)))
	l := mustConcurrency(t, store, 3, 10*time.Second)
	ctx := context.Background()

	var leases []*algorithms.Lease
	for i := 1; i <= 3; i++ {
		lease := mustAcquire(t, l, "k")
		if !lease.Allowed || lease.InFlight != i || lease.Remaining != 3-i || lease.Limit != 3 || lease.RetryAfter != 0 || lease.Decider != algorithms.DecidedByStore {
			t.Fatalf("acquire %d: %+v", i, lease)
		}
		leases = append(leases, lease)
	}
	denied := mustAcquire(t, l, "k")
	if denied.Allowed || denied.InFlight != 3 || denied.Remaining != 0 || denied.RetryAfter != algorithms.DefaultConcurrencyRetryAfter {
		t.Fatalf("fourth: %+v; want denied, 3 in flight, RetryAfter %s before any release", denied, algorithms.DefaultConcurrencyRetryAfter)
	}
	if err := denied.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if other := mustAcquire(t, l, "other"); !other.Allowed || other.InFlight != 1 {
		t.Fatalf("another key: %+v", other)
	}

	clock.Advance(200 * ms)
	if err := leases[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A second release must not free a second slot.
	if err := leases[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if again := mustAcquire(t, l, "k"); !again.Allowed || again.InFlight != 3 {
		t.Fatalf("after a release: %+v", again)
	}
	denied = mustAcquire(t, l, "k")
	if denied.Allowed || denied.RetryAfter != 200*ms {
		t.Fatalf("denied after one release held 200ms: %+v; want RetryAfter 200ms", denied)
	}

	// Leases never released (a crash) expire: the earliest caps RetryAfter.
	fixed := mustConcurrency(t, store, 3, 10*time.Second, algorithms.WithConcurrencyRetryAfter(time.Minute))
	denied = mustAcquire(t, fixed, "k")
	if denied.Allowed || denied.RetryAfter != 10*time.Second-200*ms {
		t.Fatalf("a limiter with the same limit shares the slots and caps RetryAfter at the earliest expiry: %+v", denied)
	}
	clock.Advance(10*time.Second - 200*ms)
	for i := 1; i <= 2; i++ {
		if lease := mustAcquire(t, l, "k"); !lease.Allowed || lease.InFlight != 1+i {
			t.Fatalf("after two leases expired, acquire %d: %+v", i, lease)
		}
	}
	// A different limit counts the same leases against its own (a rollout
	// that changes the limit shares them).
	if lease := mustAcquire(t, mustConcurrency(t, store, 1, time.Second), "k"); lease.Allowed || lease.InFlight != 3 {
		t.Fatalf("limit 1 on the same key: %+v; want denied, the 3 leases held counted", lease)
	}
	if lease := mustAcquire(t, mustConcurrency(t, store, 4, time.Second), "k"); !lease.Allowed || lease.InFlight != 4 {
		t.Fatalf("limit 4 on the same key: %+v; want a fourth lease", lease)
	}
}

// Entries disappear when their last lease is released, and a key whose
// leases were never released goes once they expire, even if it never sees
// another request.
func TestMemoryConcurrencyBounded(t *testing.T) {
	clock := storetest.NewManualClock(start)
	store := must(New(WithClock(clock.Now), WithSweepInterval(time.Second)))
	l := mustConcurrency(t, store, 2, 5*time.Second).(*memoryConcurrency)
	ctx := context.Background()

	for i := range 1000 {
		lease := mustAcquire(t, l, ipKey(i))
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := l.state.entries(); n != 0 {
		t.Fatalf("%d entries after every lease was released, want 0", n)
	}
	for i := range 1000 {
		mustAcquire(t, l, "crashed"+ipKey(i)) // never released
	}
	if n := l.state.entries(); n != 1000 {
		t.Fatalf("%d entries with 1000 leases held, want 1000", n)
	}
	clock.Advance(6 * time.Second)
	// Requests on other keys, in every shard, collect the expired leases.
	for i := range 2000 {
		lease := mustAcquire(t, l, "live"+ipKey(i))
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := l.state.entries(); n != 0 {
		t.Fatalf("%d entries after every lease expired, want 0", n)
	}
}

// 4 limiters on one memory store (the same limit: shared slots) × 50
// goroutines: the requests in flight never exceed the limit. The clock
// stands still, so no lease expires while held.
func TestMemoryConcurrencyParallel(t *testing.T) {
	clock := storetest.NewManualClock(start)
	store := must(New(WithClock(clock.Now)))
	ls := make([]algorithms.ConcurrencyLimiter, 4)
	for i := range ls {
		ls[i] = mustConcurrency(t, store, 5, time.Minute)
	}
	r := storetest.RunConcurrency(t, ls, 5, 50, 20, 2*time.Millisecond)
	if held := ls[0].(*memoryConcurrency).held("shared"); held != 0 {
		t.Fatalf("%d leases left held, want 0", held)
	}
	t.Logf("memory: %+v", r)
}

// The hold-time estimate weighs each release 1/8, and a fixed value wins.
func TestHoldStats(t *testing.T) {
	var h ratemath.HoldStats
	if got := h.RetryAfter(0); got != algorithms.DefaultConcurrencyRetryAfter {
		t.Errorf("before any release: %s", got)
	}
	h.Observe(800 * ms)
	h.Observe(0) // counted as a microsecond
	want := 800*ms + (time.Microsecond-800*ms)/8
	if got := h.RetryAfter(0); got != want {
		t.Errorf("after 800ms and 0: %s, want %s", got, want)
	}
	if got := h.RetryAfter(5 * ms); got != 5*ms {
		t.Errorf("capped by the earliest expiry: %s, want 5ms", got)
	}
	fixed := ratemath.HoldStats{Fixed: 3 * time.Second}
	fixed.Observe(time.Millisecond)
	if got := fixed.RetryAfter(time.Hour); got != 3*time.Second {
		t.Errorf("fixed: %s, want 3s", got)
	}
	if got := fixed.RetryAfter(time.Microsecond); got != time.Millisecond {
		t.Errorf("at least a millisecond: %s", got)
	}
}
