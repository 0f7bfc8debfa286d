package algorithms

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
)

// Requests admitted locally because their turn in Redis had not come by
// their deadline are charged in Redis when it comes: across a pause, one
// key's flood gets exactly the limit, not the limit twice (once from the
// local twin, once from Redis).
func TestLocalAdmissionsAreCharged(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	ctx := context.Background()
	const rate = 10
	l, err := New(NewRedisStore(c, WithLogger(quietLogger())), FixedWindow, PerMinute(rate))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Allow(ctx, "warm", 1); err != nil { // dial and load the script first
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "300", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			r, err := l.Allow(ctx, "flood", 1)
			if err != nil {
				t.Error(err)
			}
			if r.Allowed {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	time.Sleep(400 * time.Millisecond) // the pause ends; the charges are sent
	for range 20 {
		r, err := l.Allow(ctx, "flood", 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			allowed++
		}
	}
	if allowed != rate {
		t.Fatalf("%d admitted across the pause, want exactly %d", allowed, rate)
	}
	// One state (beside the brief records of the calls' replies).
	if n, err := admin.Keys(ctx, "*flood}:fw:*").Result(); err != nil || len(n) != 1 {
		t.Fatalf("keys %v %v", n, err)
	}
}

// quietLogger discards the store's logs, for tests whose failures are
// intended.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A charge for a local admission goes ahead of every waiter still in its
// key's line, in constant time however long the line, and the next call
// sends the charges first, then the waiters in arrival order; a charge
// withdrawn before it was sent is not sent.
func TestChargesGoAheadOfTheLine(t *testing.T) {
	b := newBatcher(1, 1000, 256, 64)
	l := &redisLimiter{}
	deadline := time.Now().Add(time.Minute)
	var line []*waiter
	for i := range 100 {
		w := newWaiter(1+i%3, deadline, false)
		if _, ok := b.submit(l, "k", w); !ok {
			t.Fatal("submit refused")
		}
		line = append(line, w)
	}
	q := b.queues[queueKey{l, "k"}]
	first, _ := b.chargeAhead(l, "k", line[40])
	withdrawn, _ := b.chargeAhead(l, "k", line[41])
	second, _ := b.chargeAhead(l, "k", line[42])
	withdrawn.state.CompareAndSwap(waiterCharge, waiterAbandoned)
	if len(q.waiters) != 100 || len(q.charges) != 3 {
		t.Fatalf("line %d, charges %d; want the line untouched and 3 charges", len(q.waiters), len(q.charges))
	}
	sent := b.take(q, time.Now(), 10)
	want := append([]*waiter{first, second}, line[:7]...) // the withdrawn charge took a place, unsent
	if len(sent) != len(want) {
		t.Fatalf("sent %d, want %d", len(sent), len(want))
	}
	for i := range want {
		if sent[i] != want[i] {
			t.Fatalf("sent[%d] is not the expected waiter (charges first, then the line in order)", i)
		}
	}
	if first.cost != line[40].cost || second.cost != line[42].cost {
		t.Fatalf("charge costs %d, %d; want %d, %d", first.cost, second.cost, line[40].cost, line[42].cost)
	}
	if b.waiting != 100+3-10 {
		t.Fatalf("waiting %d, want %d", b.waiting, 93)
	}
}
