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
