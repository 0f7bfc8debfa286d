package redisstore

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// twoInstances returns a client per application instance, each its own
// connections to the same Redis (one server at addrs[0], or the Cluster
// of addrs), and a function that kills every pub/sub connection on every
// node.
func twoInstances(t *testing.T, addrs []string, cluster bool) (a, b redis.UniversalClient, killPubSub func()) {
	t.Helper()
	newClient := func() redis.UniversalClient {
		var c redis.UniversalClient
		if cluster {
			c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		} else {
			c = redis.NewClient(&redis.Options{Addr: addrs[0]})
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	killPubSub = func() {
		t.Helper()
		for _, addr := range addrs {
			admin := redis.NewClient(&redis.Options{Addr: addr})
			err := admin.ClientKillByFilter(context.Background(), "TYPE", "pubsub").Err()
			_ = admin.Close()
			if err != nil {
				t.Fatalf("CLIENT KILL TYPE pubsub on %s: %v", addr, err)
			}
		}
	}
	return newClient(), newClient(), killPubSub
}

// The denial cache's invariant across instances: a refund or a reset made
// through store A ends store B's cached denial of the key within
// denialCacheBound, on one server and on Cluster, also when B's
// subscription connection was killed just before. B's denial is checked to
// come from its cache, past the bound of its own age (so trusted on the
// strength of the subscription), right before A acts. The cases share a
// server and a Cluster, each case under a prefix of its own.
func TestDenialCacheFollowsRefunds(t *testing.T) {
	standalone, cluster := []string{redistest.Standalone(t)}, redistest.Cluster(t)
	for i, tc := range []struct {
		name    string
		cluster bool
		kill    bool
		reset   bool
	}{
		{name: "redis/refund"},
		{name: "redis/reset", reset: true},
		{name: "redis/refund/subscription killed", kill: true},
		{name: "redis/reset/subscription killed", kill: true, reset: true},
		{name: "cluster/refund", cluster: true},
		{name: "cluster/reset", cluster: true, reset: true},
		{name: "cluster/refund/subscription killed", cluster: true, kill: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs := standalone
			if tc.cluster {
				addrs = cluster
			}
			ca, cb, kill := twoInstances(t, addrs, tc.cluster)
			ctx := context.Background()
			prefix := "refunds" + strconv.Itoa(i)
			newLimiter := func(c redis.UniversalClient) algorithms.RateLimiter {
				s := must(New(c, WithTimeout(time.Second), WithPrefix(prefix)))
				t.Cleanup(func() { _ = s.Close(closeSoon()) })
				l, err := algorithms.New(s, algorithms.FixedWindow, algorithms.PerMinute(2))
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			a, b := newLimiter(ca), newLimiter(cb)
			const key = "customer{7}"
			for range 2 {
				if r, err := a.Allow(ctx, key, 1); err != nil || !r.Allowed {
					t.Fatalf("A: %+v, %v", r, err)
				}
			}
			if r, err := b.Allow(ctx, key, 1); err != nil || r.Allowed || r.Decider != algorithms.DecidedByStore {
				t.Fatalf("B, quota spent: %+v, %v; want denied by Redis", r, err)
			}
			// The first denial predates B's subscription, so Redis may be
			// asked again once the bound has passed; the next is followed.
			for i := range 2 {
				time.Sleep(denialCacheBound + 50*time.Millisecond)
				r, err := b.Allow(ctx, key, 1)
				if err != nil || r.Allowed || i == 1 && r.Decider != algorithms.DecidedByCache {
					t.Fatalf("B, before A acts (%d): %+v, %v; want denied by its cache", i, r, err)
				}
			}
			if tc.kill {
				kill()
			}
			if tc.reset {
				if err := a.Reset(ctx, key); err != nil {
					t.Fatal(err)
				}
			} else if _, err := a.Refund(ctx, key, 1, 0); err != nil {
				t.Fatal(err)
			}
			acted := time.Now()
			for {
				r, err := b.Allow(ctx, key, 1)
				if err != nil {
					t.Fatal(err)
				}
				if r.Allowed {
					t.Logf("B admitted %v after A acted", time.Since(acted))
					break
				}
				if time.Since(acted) > denialCacheBound {
					t.Fatalf("B still denies %v after A acted: %+v", time.Since(acted), r)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}

// The store that refunds or resets forgets its own cached denials of the
// key at once, under every limiter it has for the key: a second limiter
// with the same limit shares the key's state in Redis.
func TestDenialCacheForgetsAtOnceLocally(t *testing.T) {
	for _, reset := range []bool{false, true} {
		t.Run(map[bool]string{false: "refund", true: "reset"}[reset], func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
			defer c.Close()
			ctx := context.Background()
			store := must(New(c))
			x, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(1))
			if err != nil {
				t.Fatal(err)
			}
			y, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(1))
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []algorithms.Decider{algorithms.DecidedByStore, algorithms.DecidedByStore, algorithms.DecidedByCache} {
				if r, err := x.Allow(ctx, "k", 1); err != nil || r.Allowed != (i == 0) || r.Decider != want {
					t.Fatalf("request %d: %+v, %v; want decided by %s", i, r, err, want)
				}
			}
			if reset {
				err = y.Reset(ctx, "k")
			} else {
				_, err = y.Refund(ctx, "k", 1, 0)
			}
			if err != nil {
				t.Fatal(err)
			}
			if r, err := x.Allow(ctx, "k", 1); err != nil || !r.Allowed {
				t.Fatalf("right after: %+v, %v; want admitted", r, err)
			}
		})
	}
}

// Without a subscription a cached denial answers for denialCacheBound
// after its request, then Redis is asked; when Redis cannot answer, it
// still holds until its end. A denial whose request was sent before its
// key's denials were forgotten is not remembered: its reply may have
// crossed the refund.
func TestDenialCacheTrust(t *testing.T) {
	l := &redisLimiter{}
	t0 := time.Unix(1_700_000_000, 0)
	denied := algorithms.Result{RetryAfter: time.Minute, Limit: 1}
	const ms = time.Millisecond
	for _, tc := range []struct {
		name                 string
		forgot               time.Duration // after t0; negative: never
		sent, replied, asked time.Duration
		wantLookup, wantHeld bool
	}{
		{"young", -1, 0, ms, denialCacheBound / 2, true, true},
		{"as old as the bound", -1, 0, ms, denialCacheBound, false, true},
		{"expired", -1, 0, ms, time.Minute, false, false},
		{"sent before a forget", ms, 0, 2 * ms, 3 * ms, false, false},
		{"sent as a forget", 0, 0, 2 * ms, 3 * ms, false, false},
		{"sent after a forget", 0, ms, 2 * ms, 3 * ms, true, true},
		{"reply too late", -1, 0, 2 * time.Second, 2 * time.Second, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0
			d := newDenials(100)
			d.clock = func() time.Time { return now }
			if tc.forgot >= 0 {
				now = t0.Add(tc.forgot)
				d.forget("k")
			}
			now = t0.Add(tc.replied)
			d.remember(l, "k", 1, t0.Add(tc.sent), denied)
			now = t0.Add(tc.asked)
			if _, ok := d.lookup(l, "k", 1, now); ok != tc.wantLookup {
				t.Errorf("lookup: %v, want %v", ok, tc.wantLookup)
			}
			if _, ok := d.held(l, "k", 1, now); ok != tc.wantHeld {
				t.Errorf("held: %v, want %v", ok, tc.wantHeld)
			}
		})
	}
}

// The subscription runs only once the store has cached a denial, and its
// goroutines end when the store is closed, or the client.
func TestDenialSyncStops(t *testing.T) {
	for _, closeClient := range []bool{false, true} {
		t.Run(map[bool]string{false: "store closed", true: "client closed"}[closeClient], func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
			defer c.Close()
			store := must(New(c))
			l, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(1))
			if err != nil {
				t.Fatal(err)
			}
			if n := syncGoroutines(); n != 0 {
				t.Fatalf("%d subscription goroutines before any denial", n)
			}
			for range 2 {
				if _, err := l.Allow(context.Background(), "k", 1); err != nil {
					t.Fatal(err)
				}
			}
			waitGoroutines(t, 2)
			if closeClient {
				_ = c.Close()
			} else {
				_ = store.Close(closeCtx())
			}
			waitGoroutines(t, 0)
		})
	}
}

// waitGoroutines waits up to 5 s for n goroutines to run a denialSync: a
// subscription whose client was closed may first sit out its retry pause
// (up to retryMax), longer on a loaded machine.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); syncGoroutines() != n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d subscription goroutines running, want %d", syncGoroutines(), n)
		}
	}
}

// syncGoroutines counts the goroutines running a denialSync.
func syncGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "(*denialSync).receive") || strings.Contains(g, "(*denialSync).ping") {
			n++
		}
	}
	return n
}

// A newer denial of the same cost replaces the older, even when it ends a
// little sooner (a fixed window's end, measured from a later request): the
// older, past the bound of its age, may no longer be trusted.
func TestDenialCacheKeepsTheNewerDenial(t *testing.T) {
	l := &redisLimiter{}
	t0 := time.Unix(1_700_000_000, 0)
	now := t0
	d := newDenials(100)
	d.clock = func() time.Time { return now }
	d.remember(l, "k", 1, t0, algorithms.Result{RetryAfter: time.Minute})
	now = t0.Add(2 * denialCacheBound)
	d.remember(l, "k", 1, now, algorithms.Result{RetryAfter: time.Minute - 2*denialCacheBound - time.Millisecond})
	if _, ok := d.lookup(l, "k", 1, now.Add(time.Millisecond)); !ok {
		t.Fatal("the newer denial does not answer")
	}
}
