package redisstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestWithinSpawnsOnlyWhenNeeded: Peek, Reset, Reserve, Charge and Refund
// run on their caller's goroutine on a client that honours a context's
// deadline, and on a goroutine of the store's crew, which their deadline
// does not wait for, on one that does not; on both they answer alike.
func TestWithinSpawnsOnlyWhenNeeded(t *testing.T) {
	addr := redistest.Standalone(t)
	remaining := map[bool]int{}
	for _, inline := range []bool{true, false} {
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: inline})
		t.Cleanup(func() { _ = c.Close() })
		s := probeStore(t, c, WithPrefix("within"), WithEvictionAllowed())
		l := mustNew(t, s, algorithms.TokenBucket, algorithms.PerMinute(10)).(algorithms.RateLimiter)
		ctx := context.Background()
		spawned := func() uint64 {
			s.guard.crew.mu.Lock()
			defer s.guard.crew.mu.Unlock()
			return s.guard.crew.spawned
		}
		before := spawned()
		const rounds = 20
		for range rounds {
			if err := l.Reset(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			if res, err := l.Reserve(ctx, "k", 2, time.Second); err != nil || !res.Allowed {
				t.Fatalf("Reserve: %+v %v", res, err)
			}
			if _, err := l.Charge(ctx, "k", 3); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Refund(ctx, "k", 1, 0); err != nil {
				t.Fatal(err)
			}
			res, err := l.Peek(ctx, "k")
			if err != nil || res.Remaining > 10-2-3+1 || res.Remaining < 10-2-3 {
				t.Fatalf("Peek: %+v %v, want %d or %d remaining", res, err, 10-2-3, 10-2-3+1)
			}
			remaining[inline] = res.Remaining
		}
		got := spawned() - before
		if inline && got != 0 {
			t.Errorf("client with ContextTimeoutEnabled: %d goroutines for %d calls, want none", got, 5*rounds)
		}
		if !inline && got < 5*rounds {
			t.Errorf("client without ContextTimeoutEnabled: %d goroutines for %d calls, want one each", got, 5*rounds)
		}
	}
	if remaining[true] != remaining[false] {
		t.Errorf("remaining %v: the two clients' calls answered differently", remaining)
	}
}

// TestSingleCallsHonourTheBreaker: while the breaker is open, Peek,
// Reset, Reserve, Charge and Refund ask nothing of a frozen Redis: each
// answers at once, Peek, Reset and Refund with an error, Reserve decided
// by the failure mode, Charge with an error and its cost owed to Redis.
func TestSingleCallsHonourTheBreaker(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	s := probeStore(t, c, WithPrefix("open"), WithEvictionAllowed(), WithTimeout(time.Second),
		WithBreaker(BreakerPolicy{OpenFor: time.Minute, MaxOpenFor: time.Minute}))
	l := mustNew(t, s, algorithms.TokenBucket, algorithms.PerMinute(10)).(algorithms.RateLimiter)
	ctx := context.Background()
	if _, err := l.Peek(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	defer srv.Thaw()
	s.guard.breaker.Trip(s.guard.clock(), "a test")
	for _, tc := range []struct {
		name    string
		call    func() error
		wantErr bool
	}{
		{"Peek", func() error { _, err := l.Peek(ctx, "k"); return err }, true},
		{"Reset", func() error { return l.Reset(ctx, "k") }, true},
		{"Refund", func() error { _, err := l.Refund(ctx, "k", 1, 0); return err }, true},
		{"Charge", func() error { _, err := l.Charge(ctx, "k", 2); return err }, true},
		{"Reserve", func() error {
			res, err := l.Reserve(ctx, "k", 1, time.Second)
			if err == nil && res.Decider != algorithms.DecidedLocally {
				return fmt.Errorf("decided by %s, want locally", res.Decider)
			}
			return err
		}, false},
	} {
		start := time.Now()
		err := tc.call()
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Errorf("%s took %s with the breaker open, want at once", tc.name, took)
		}
		if (err != nil) != tc.wantErr || (tc.wantErr && !errors.Is(err, errBreakerOpen)) {
			t.Errorf("%s: %v, want an error %v", tc.name, err, tc.wantErr)
		}
	}
	if owed := s.guard.batcher.owedKeys(); owed != 1 {
		t.Errorf("%d keys owe a charge, want the charged one", owed)
	}
}
