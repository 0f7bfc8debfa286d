package redisstore

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/internal/redistest"
)

// 4 clients (4 application instances, each with its own store) × 50
// goroutines on one key, each admitted request holding its lease a few ms:
// the requests in flight never exceed the limit, and every lease is gone
// from Redis afterwards.
func testConcurrencyShared(t *testing.T, newClient func() redis.UniversalClient) {
	const limit = 5
	ls := make([]algorithms.ConcurrencyLimiter, 4)
	var c redis.UniversalClient
	for i := range ls {
		c = newClient()
		t.Cleanup(func() { c.Close() })
		// A generous timeout: a decision made locally on a loaded machine
		// would be this instance's own, not the shared limit under test.
		ls[i] = mustConcurrency(t, must(New(c, WithTimeout(5*time.Second))), limit, 10*time.Second)
	}
	r := storetest.RunConcurrency(t, ls, limit, 50, 10, 3*time.Millisecond)
	t.Logf("%+v", r)
	n, err := c.Exists(context.Background(), "rl:{shared}:cc").Result()
	if err != nil || n != 0 {
		t.Fatalf("the set of leases exists (%d, %v) after every lease was released", n, err)
	}
}

func TestRedisConcurrencyShared(t *testing.T) {
	addr := redistest.Standalone(t)
	testConcurrencyShared(t, func() redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	})
}

func TestClusterConcurrencyShared(t *testing.T) {
	addrs := redistest.Cluster(t)
	testConcurrencyShared(t, func() redis.UniversalClient {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1})
	})
}

// Leases never released (their instance crashed) free their slots after
// the lease; the set's TTL is no longer than the lease; the key is the
// store's, hash-tagged.
func TestRedisConcurrencyLeaseExpires(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	const lease = time.Second
	crashed := mustConcurrency(t, must(New(c)), 2, lease)
	for i := 1; i <= 2; i++ {
		if l := mustAcquire(t, crashed, "user:7"); !l.Allowed || l.InFlight != i || l.Remaining != 2-i || l.Decider != algorithms.DecidedByStore {
			t.Fatalf("acquire %d: %+v", i, l)
		}
	}
	survivor := mustConcurrency(t, must(New(c)), 2, lease)
	denied := mustAcquire(t, survivor, "user:7")
	if denied.Allowed || denied.InFlight != 2 || denied.RetryAfter <= 0 || denied.RetryAfter > lease {
		t.Fatalf("third: %+v; want denied with RetryAfter within the lease", denied)
	}
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil || len(keys) != 1 || keys[0] != "rl:{user:7}:cc" {
		t.Fatalf("keys %q (%v), want exactly rl:{user:7}:cc", keys, err)
	}
	if ttl, err := c.PTTL(ctx, keys[0]).Result(); err != nil || ttl <= 0 || ttl > lease {
		t.Fatalf("TTL %s (%v), want within %s", ttl, err, lease)
	}
	time.Sleep(lease + 50*ms)
	l := mustAcquire(t, survivor, "user:7")
	if !l.Allowed || l.InFlight != 1 {
		t.Fatalf("after the crashed leases expired: %+v", l)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Exists(ctx, keys[0]).Result(); n != 0 {
		t.Fatal("the set outlived its last lease's release")
	}
}

// A sequential client never meets its own released lease: Release has
// reached Redis before it returns, so a limit of 1 admits every request of
// a client that waits for each.
func TestRedisConcurrencySequential(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	l := mustConcurrency(t, must(New(c)), 1, time.Minute)
	for i := range 200 {
		lease := mustAcquire(t, l, "seq")
		if !lease.Allowed {
			t.Fatalf("request %d denied: %+v", i, lease)
		}
		if err := lease.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// Without Redis the limit never disappears unless fail-open was chosen:
// FailLocal keeps this instance's share (limit / instances) in memory and
// releases there; every answer comes within the timeout. A call that was
// never written (no connection) leaves nothing to release from Redis.
func TestRedisConcurrencyUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * ms})
	defer c.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		mode    FailureMode
		allowed int
		decider algorithms.Decider
	}{
		{FailLocal, 2, algorithms.DecidedLocally}, // 4 shared by 2 instances
		{FailOpen, 5, algorithms.DecidedFailOpen},
		{FailClosed, 0, algorithms.DecidedFailClosed},
	} {
		st := must(New(c, WithFailureMode(tc.mode), WithInstances(2)))
		defer st.Close(closeCtx())
		l := mustConcurrency(t, st, 4, time.Minute)
		var held []*algorithms.Lease
		for range 5 {
			began := time.Now()
			lease := mustAcquire(t, l, "k")
			if d := time.Since(began); d > DefaultTimeout+50*ms {
				t.Errorf("%s: took %s", tc.mode, d)
			}
			if lease.Decider != tc.decider {
				t.Errorf("%s: decided by %s", tc.mode, lease.Decider)
			}
			if lease.Allowed {
				held = append(held, lease)
			} else if lease.RetryAfter <= 0 {
				t.Errorf("%s: denied without RetryAfter: %+v", tc.mode, lease)
			}
		}
		if len(held) != tc.allowed {
			t.Fatalf("%s: %d of 5 admitted, want %d", tc.mode, len(held), tc.allowed)
		}
		if tc.mode == FailLocal {
			if err := held[0].Release(ctx); err != nil {
				t.Fatalf("a local lease's release: %v", err)
			}
			if lease := mustAcquire(t, l, "k"); !lease.Allowed || lease.Decider != algorithms.DecidedLocally {
				t.Fatalf("after a local release: %+v", lease)
			}
		}
		waitLineEmpty(t, st.guard.releases, DefaultTimeout+time.Second)
	}
}

// A lease Redis grants after its Acquire gave up (the caller decided
// locally meanwhile) is given back (by the release line), not left holding
// a slot until it expires; the caller's context canceled is an error, not
// a decision.
func TestRedisConcurrencyLateGrantGivenBack(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	l := mustConcurrency(t, must(New(c, WithTimeout(50*ms))), 3, time.Minute)
	if err := c.Ping(ctx).Err(); err != nil { // connected before the pause
		t.Fatal(err)
	}
	if _, err := srv.Do("CLIENT", "PAUSE", "400", "ALL"); err != nil {
		t.Fatal(err)
	}
	lease := mustAcquire(t, l, "late")
	if !lease.Allowed || lease.Decider != algorithms.DecidedLocally {
		t.Fatalf("during the pause: %+v, want a local admission", lease)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if got, err := l.Acquire(canceled, "late"); !errors.Is(err, context.Canceled) || got != nil {
		t.Fatalf("canceled context: %v, %v", got, err)
	}
	// The pause ends at 400 ms; the call then runs and is answered well
	// within its own limit of a second.
	time.Sleep(time.Second)
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stats, "cmdstat_zrem:calls=") {
		t.Fatalf("no ZREM of the late lease:\n%s", stats)
	}
	if n, err := c.ZCard(ctx, "rl:{late}:cc").Result(); err != nil || n != 0 {
		t.Fatalf("%d leases (%v) left in Redis after a late grant", n, err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Release that cannot reach Redis returns an error within the timeout,
// never hangs; a second Release does nothing.
func TestRedisConcurrencyReleaseWithoutRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 200 * ms})
	defer c.Close()
	st := must(New(c, WithLogger(quietLogger())))
	defer st.Close(closeCtx())
	l := mustConcurrency(t, st, 2, time.Minute)
	lease := mustAcquire(t, l, "k")
	if !lease.Allowed || lease.Decider != algorithms.DecidedByStore {
		t.Fatalf("%+v", lease)
	}
	srv.Stop()
	began := time.Now()
	if err := lease.Release(context.Background()); err == nil {
		t.Fatal("a release without Redis reported no error")
	}
	if d := time.Since(began); d > DefaultTimeout+50*ms {
		t.Fatalf("release took %s", d)
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Fatalf("second release: %v", err)
	}
}

// A Redis store that did not come from New is refused, as a memory store
// is (memstore's TestConcurrencyInvalid); New itself refuses a nil client
// and bad options (TestNewRefusesInvalidOptions).
func TestConcurrencyInvalidRedisStore(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store algorithms.Store
	}{
		{"zero redis store", &Store{}},
		{"typed nil redis store", (*Store)(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := algorithms.NewConcurrency(tc.store, 1, time.Second)
			if !errors.Is(err, algorithms.ErrInvalidOption) || l != nil {
				t.Fatalf("got %v, %v; want an error wrapping %v", l, err, algorithms.ErrInvalidOption)
			}
		})
	}
}
