package redisstore

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memstore"
)

// Requests admitted locally because their turn in Redis had not come by
// their deadline are charged in Redis when it comes: across a pause, one
// key's flood gets exactly the limit, not the limit twice (once from the
// local twin, once from Redis). Also with a waiting line as long as the
// flood: a charge takes over the place its request's waiter held, so a
// full line does not lose it.
func TestLocalAdmissionsAreCharged(t *testing.T) {
	const rate, flood = 10, 50
	for _, tt := range []struct {
		name string
		opts []Option
	}{
		{"default", nil},
		{"line full", []Option{WithMaxWaiting(flood)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, admin := clientAndAdmin(t)
			ctx := context.Background()
			l, err := algorithms.New(must(New(c, append([]Option{WithLogger(quietLogger())}, tt.opts...)...)), algorithms.FixedWindow, algorithms.PerMinute(rate))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Allow(ctx, "warm", 1); err != nil { // dial and load the script first
				t.Fatal(err)
			}
			if err := admin.Do(ctx, "CLIENT", "PAUSE", "300", "ALL").Err(); err != nil {
				t.Fatal(err)
			}
			var allowed atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{}) // all at once, so the line fills
			for range flood {
				wg.Go(func() {
					<-start
					r, err := l.Allow(ctx, "flood", 1)
					if err != nil {
						t.Error(err)
					}
					if r.Allowed {
						allowed.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			time.Sleep(400 * time.Millisecond) // the pause ends; the charges are sent
			for range 20 {
				r, err := l.Allow(ctx, "flood", 1)
				if err != nil {
					t.Fatal(err)
				}
				if r.Allowed {
					allowed.Add(1)
				}
			}
			if n := allowed.Load(); n != rate {
				t.Fatalf("%d admitted across the pause, want exactly %d", n, rate)
			}
			// One state (beside the brief records of the calls' replies).
			if n, err := admin.Keys(ctx, "*flood}:fw:*").Result(); err != nil || len(n) != 1 {
				t.Fatalf("keys %v %v", n, err)
			}
		})
	}
}

// clientAndAdmin starts a real server and returns a client that never
// resends a command and one for the test's own commands, both closed when
// the test ends.
func clientAndAdmin(t *testing.T) (client, admin *redis.Client) {
	addr := redistest.Standalone(t)
	client = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	admin = redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = client.Close(); _ = admin.Close() })
	return client, admin
}

// quietLogger discards the store's logs, for tests whose failures are
// intended.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A local admission adds its cost to its key's owed charge, one number
// however many requests; a refused request adds nothing; the key's next
// take carries the charge with the waiters, in the same lock; a charge
// whose call failed stays owed under the same call id, and new admissions
// wait beside it; a key a full table has no room for is decided by its
// twin from forgottenAllowance, owing nothing.
func TestChargeLine(t *testing.T) {
	b := newBatcher(1, 100, 256, 64)
	b.retrying = true // no retrier: this test sends nothing
	b.maxOwed = 2
	twin, err := algorithms.New(must(memstore.New()), algorithms.FixedWindow, algorithms.PerMinute(10))
	if err != nil {
		t.Fatal(err)
	}
	l := &redisLimiter{alg: algorithms.FixedWindow, limits: []algorithms.Limit{algorithms.PerMinute(10)}, twin: twin, twinIndex: []int{0}, twinMost: 10,
		instances: 1, guard: &guard{ids: newCallIDs(), batcher: b, clock: time.Now}}
	deadline := time.Now().Add(time.Minute)
	var line []*waiter
	for i := range 100 {
		w := newWaiter(1+i%3, deadline, false)
		if _, ok := b.submit(l, "k", w); !ok {
			t.Fatal("submit refused")
		}
		line = append(line, w)
	}
	admit := func() (algorithms.Result, error) {
		return algorithms.Result{Allowed: true, Decider: algorithms.DecidedLocally}, nil
	}
	refuse := func() (algorithms.Result, error) { return algorithms.Result{Decider: algorithms.DecidedLocally}, nil }
	charge := func(key string, cost int, decide func() (algorithms.Result, error)) algorithms.Result {
		t.Helper()
		res, err := b.decideAndCharge(l, key, cost, callDoubt{}, decide)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	charge("k", 7, admit)
	charge("k", 8, refuse) // refused: no charge
	charge("k", 5, admit)
	if o := b.owed[queueKey{l, "k"}]; o == nil || o.cost != 12 || len(b.queues[queueKey{l, "k"}].waiters) != 100 {
		t.Fatalf("owed %+v; want 12 and the line untouched", o)
	}
	q := b.queues[queueKey{l, "k"}]
	sent, _, taken := b.take(q, time.Now(), 10, true, nil)
	if len(sent) != 10 || taken.cost != 12 || taken.id == 0 {
		t.Fatalf("sent %d, charge %+v; want 10 waiters and the charge of 12", len(sent), taken)
	}
	for i, w := range sent {
		if w != line[i] {
			t.Fatalf("sent[%d] is not the line's waiter %d: the line must follow in arrival order", i, i)
		}
	}
	if _, _, again := b.take(q, time.Now(), 10, true, nil); again.cost != 0 {
		t.Fatalf("a charge in flight was taken twice: %+v", again)
	}
	charge("k", 3, admit) // owed beside the charge in flight
	failed := []chargePart{{call: &scriptCall{}, group: -1}}
	if b.settleParts([]chargeTaken{taken}, failed) {
		t.Fatal("a call that did not run reported counted")
	}
	_, _, retry := b.take(q, time.Now(), 10, true, nil)
	if retry.id != taken.id || retry.cost != 12 {
		t.Fatalf("retry %+v; want the same id %d and cost 12, the new 3 kept apart", retry, taken.id)
	}
	// The table holds two keys: a third key is decided by its twin, from
	// forgottenAllowance (1) of its 10, and owes nothing.
	charge("j", 1, admit)
	asked := false
	for i := range 3 {
		res := charge("i", 1, func() (algorithms.Result, error) { asked = true; return admit() })
		if asked || res.Allowed != (i < forgottenAllowance) || res.Decider != algorithms.DecidedLocally {
			t.Fatalf("request %d of a key with no room in a full table: asked %v, %+v; want the twin's, %d admitted", i, asked, res, forgottenAllowance)
		}
	}
	if o := b.owed[queueKey{l, "i"}]; o != nil || len(b.owed) != 2 {
		t.Fatalf("a key with no room owes %+v (%d keys owe); want nothing", o, len(b.owed))
	}
	if b.waiting != 100-30 { // three takes of ten
		t.Fatalf("waiting %d, want %d", b.waiting, 70)
	}
}

// A request the local twin refuses is never counted in Redis: with the
// twin full and Redis empty, requests whose deadline is too close for a
// round trip are refused locally, and Redis's count stays at nothing.
func TestRefusedLocallyIsNotCharged(t *testing.T) {
	c, admin := clientAndAdmin(t)
	ctx := context.Background()
	const rate = 5
	rl, err := algorithms.New(must(New(c, WithLogger(quietLogger()))), algorithms.FixedWindow, algorithms.PerMinute(rate))
	if err != nil {
		t.Fatal(err)
	}
	l := rl.(*redisLimiter)
	if _, err := l.Allow(ctx, "warm", 1); err != nil { // dial and load the script first
		t.Fatal(err)
	}
	for range rate { // the twin only: Redis still has all of it
		if r, err := l.twin.Allow(ctx, "k", 1); err != nil || !r.Allowed {
			t.Fatalf("twin: %+v %v", r, err)
		}
	}
	for range 20 {
		dctx, cancel := context.WithTimeout(ctx, minRoundTrip/2) // dropped unsent
		r, err := l.Allow(dctx, "k", 1)
		cancel()
		if err != nil || r.Allowed || r.Decider != algorithms.DecidedLocally {
			t.Fatalf("got %+v %v; want a local refusal", r, err)
		}
	}
	time.Sleep(200 * time.Millisecond) // any charge would have been sent by now
	keys, err := admin.Keys(ctx, "*k}:fw:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		v, _ := admin.Get(ctx, keys[0]).Result()
		t.Fatalf("Redis counted refused requests: %s = %q", keys[0], v)
	}
}

// A decision whose deadline passed while it waited in this process for a
// connection is logged as such, not as too many decisions waiting.
func TestQueuedPastDeadlineIsLoggedAsSuch(t *testing.T) {
	c, admin := clientAndAdmin(t)
	ctx := context.Background()
	var logs syncBuffer
	l, err := algorithms.New(must(New(c, WithMaxInFlight(1), WithTimeout(100*time.Millisecond),
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))), algorithms.FixedWindow, algorithms.PerMinute(10))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Allow(ctx, "warm", 1); err != nil { // dial and load the script first
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "400", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	// The one call in flight: its caller leaves (a canceled context logs
	// nothing), its call stays stuck in the pause.
	first, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = l.Allow(first, "a", 1)
	}()
	time.Sleep(20 * time.Millisecond)
	time.AfterFunc(30*time.Millisecond, cancel) // the first leaves before its deadline
	res, err := l.Allow(ctx, "b", 1)            // waits in line past its deadline
	<-done
	if err != nil || res.Decider != algorithms.DecidedLocally {
		t.Fatalf("got %+v %v; want a local decision", res, err)
	}
	out := logs.String()
	if !strings.Contains(out, "deadline passed before a connection was free") || strings.Contains(out, "too many decisions waiting") {
		t.Fatalf("log %q; want the deadline named, not a full line", out)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A key that owes a charge is not flushed on its caller's goroutine, even
// by a client that allows it: the charge goes with a call's full time, so
// a request whose own deadline is all but gone neither loses the charge
// nor makes Redis look down (five such failures in a row would open the
// breaker).
func TestChargeNotSentInline(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	rl, err := algorithms.New(must(New(c, WithLogger(quietLogger()))), algorithms.FixedWindow, algorithms.PerMinute(10))
	if err != nil {
		t.Fatal(err)
	}
	l := rl.(*redisLimiter)
	ctx := context.Background()
	if _, err := l.Allow(ctx, "warm", 1); err != nil { // dial and load the script first
		t.Fatal(err)
	}
	if !l.guard.inline {
		t.Fatal("the client should allow decisions on the caller's goroutine")
	}
	b := l.guard.batcher
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6"}
	for _, key := range keys {
		b.mu.Lock()
		b.chargeLocked(queueKey{l, key}, 4, false, callDoubt{}) // four admitted locally
		b.mu.Unlock()
		short, cancel := context.WithTimeout(ctx, minRoundTrip/2) // dropped unsent
		_, _ = l.Allow(short, key, 1)
		cancel()
		time.Sleep(5 * time.Millisecond)
	}
	if res, err := l.Allow(ctx, "after", 1); err != nil || res.Decider != algorithms.DecidedByStore {
		t.Fatalf("after the charges: %+v %v; want Redis to decide (the breaker closed)", res, err)
	}
	for _, key := range keys {
		deadline := time.Now().Add(2 * time.Second)
		for {
			res, err := l.Peek(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if res.Remaining <= 10-4-1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the charge of 4 never reached Redis: %+v", key, res)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// A key is gated from its first local decision until its charges are
// counted and gateGrace has passed, or, when what it owed was dropped (a
// reset), gateGrace from then; the gate then ends and nothing is left.
func TestGateEnds(t *testing.T) {
	clock := storetest.NewManualClock(time.Unix(1_800_000_000, 0))
	b := newBatcher(1, 100, 256, 64)
	b.retrying = true // no retrier: this test sends nothing
	b.clock = clock.Now
	l := &redisLimiter{alg: algorithms.FixedWindow, limits: []algorithms.Limit{algorithms.PerMinute(10)}, guard: &guard{ids: newCallIDs(), batcher: b}}
	admit := func() (algorithms.Result, error) {
		return algorithms.Result{Allowed: true, Decider: algorithms.DecidedLocally}, nil
	}
	gated := func(key string) bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.gatedLocked(queueKey{l, key}, clock.Now())
	}
	for _, reset := range []bool{false, true} {
		if _, err := b.decideAndCharge(l, "k", 1, callDoubt{}, admit); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
		if !gated("k") {
			t.Fatal("a key that owes is not gated")
		}
		if reset {
			b.forgetCharge(l, "k")
		} else {
			b.mu.Lock()
			taken, _ := b.takeChargeLocked(queueKey{l, "k"})
			b.mu.Unlock()
			b.settleParts([]chargeTaken{taken}, []chargePart{{call: &scriptCall{cmd: redis.NewCmdResult("1 1 0 0 0", nil)}, group: -1}})
		}
		if !gated("k") {
			t.Fatalf("reset %v: the gate ended before its grace", reset)
		}
		clock.Advance(gateGrace)
		if gated("k") || len(b.gates) != 0 || b.gated.Load() != 0 || len(b.owed) != 0 {
			t.Fatalf("reset %v: after the grace gates %v (%d), owed %v; want none", reset, b.gates, b.gated.Load(), b.owed)
		}
	}
}
