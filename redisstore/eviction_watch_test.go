package redisstore

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// shortEvictionChecks makes the stores made from now on read the policy
// again every d (and retry after d); distrust is still logged at most once
// a minute.
func shortEvictionChecks(t *testing.T, d time.Duration) {
	t.Helper()
	every, retry := evictionCheckEvery, evictionRetryEvery
	evictionCheckEvery, evictionRetryEvery = d, d
	t.Cleanup(func() { evictionCheckEvery, evictionRetryEvery = every, retry })
}

// awaitEvictionRead waits for a store's first read of the policy.
func awaitEvictionRead(t *testing.T, st *Store) {
	t.Helper()
	if st.guard.evict == nil {
		return
	}
	select {
	case <-st.guard.evict.first:
	case <-time.After(10 * time.Second):
		t.Fatal("the store never read the eviction policy")
	}
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("after 5 s: %s", what)
		}
	}
}

// deciderOf is the Decider of one Allow.
func deciderOf(t *testing.T, l algorithms.Limiter, key string) algorithms.Decider {
	t.Helper()
	res, err := l.Allow(context.Background(), key, 1)
	if err != nil {
		t.Fatal(err)
	}
	return res.Decider
}

const evictLog = "Redis may evict rate-limit state"

// On an evicting Redis (allkeys-lru, maxmemory set) a store decides by
// its FailureMode, Allow, Reserve and Acquire alike, and logs why once (not
// at each of its reads); WithEvictionAllowed lets Redis decide, silently.
func TestStoreDistrustsEvictingRedis(t *testing.T) {
	shortEvictionChecks(t, 10*time.Millisecond)
	srv := redistest.StartServerWith(t, "--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru")
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	tests := []struct {
		name string
		opts []Option
		want algorithms.Decider
		logs int
	}{
		{"default FailLocal", nil, algorithms.DecidedLocally, 1},
		{"FailOpen", []Option{WithFailureMode(FailOpen)}, algorithms.DecidedFailOpen, 1},
		{"FailClosed", []Option{WithFailureMode(FailClosed)}, algorithms.DecidedFailClosed, 1},
		{"WithEvictionAllowed", []Option{WithEvictionAllowed()}, algorithms.DecidedByStore, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs syncBuffer
			st := must(New(c, append(tt.opts, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))...))
			t.Cleanup(func() { _ = st.Close(closeCtx()) })
			awaitEvictionRead(t, st)
			ctx := context.Background()
			l := mustReserver(t, st, algorithms.TokenBucket, algorithms.PerMinute(100))
			for i := range 3 {
				if got := deciderOf(t, l, "k"); got != tt.want {
					t.Fatalf("Allow %d decided by %v, want %v", i, got, tt.want)
				}
			}
			if res, err := l.Reserve(ctx, "k", 1, time.Second); err != nil || res.Decider != tt.want {
				t.Fatalf("Reserve: %+v, %v; want decided by %v", res, err, tt.want)
			}
			cl := mustConcurrency(t, st, 5, time.Minute)
			if lease := mustAcquire(t, cl, "k"); lease.Decider != tt.want {
				t.Fatalf("Acquire decided by %v, want %v", lease.Decider, tt.want)
			}
			time.Sleep(150 * time.Millisecond) // about 15 reads more
			out := logs.String()
			if got := strings.Count(out, evictLog); got != tt.logs {
				t.Fatalf("logged %d times, want %d:\n%s", got, tt.logs, out)
			}
			if tt.logs > 0 && (!strings.Contains(out, "allkeys-lru") || strings.Contains(out, srv.Addr)) {
				t.Fatalf("the log should name the policy and not the server:\n%s", out)
			}
		})
	}
}

// While Redis may evict, a Charge is the twin's under FailLocal, so the
// twin that decides counts it (and Redis is owed it).
func TestChargeWhileRedisMayEvict(t *testing.T) {
	srv := redistest.StartServerWith(t, "--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru")
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	st := must(New(c, WithLogger(quietLogger())))
	t.Cleanup(func() { _ = st.Close(closeCtx()) })
	awaitEvictionRead(t, st)
	l := mustReserver(t, st, algorithms.FixedWindow, algorithms.PerMinute(5))
	ctx := context.Background()
	res, err := l.Charge(ctx, "k", 4)
	if err != nil || res.Decider != algorithms.DecidedLocally || res.Remaining != 1 {
		t.Fatalf("Charge: %+v, %v; want 1 left, decided locally", res, err)
	}
	if res, _ := l.Allow(ctx, "k", 2); res.Allowed || res.Decider != algorithms.DecidedLocally {
		t.Fatalf("Allow of 2 after a charge of 4 of 5: %+v, want a local denial", res)
	}
}

// The policy is read again: CONFIG SET to an evicting policy at runtime
// makes the store decide by its FailureMode, and back to noeviction makes
// it trust Redis again, each change logged once.
func TestEvictionPolicyChangedAtRuntime(t *testing.T) {
	shortEvictionChecks(t, 20*time.Millisecond)
	srv := redistest.StartServerWith(t, "--maxmemory", "100mb")
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	var logs syncBuffer
	st := must(New(c, WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))))
	t.Cleanup(func() { _ = st.Close(closeCtx()) })
	awaitEvictionRead(t, st)
	l := mustNew(t, st, algorithms.SlidingWindowCounter, algorithms.PerMinute(1000))
	steps := []struct {
		policy string
		want   algorithms.Decider
	}{
		{"noeviction", algorithms.DecidedByStore},
		{"allkeys-lru", algorithms.DecidedLocally},
		{"noeviction", algorithms.DecidedByStore},
		{"volatile-lfu", algorithms.DecidedLocally},
	}
	for _, s := range steps {
		setPolicy(t, c, s.policy, "100mb")
		eventually(t, "decided by "+s.want.String()+" under "+s.policy, func() bool { return deciderOf(t, l, "k") == s.want })
	}
	out := logs.String()
	if got, again := strings.Count(out, evictLog), strings.Count(out, "it decides again"); got != 2 || again != 1 {
		t.Fatalf("logged distrust %d times and trust %d, want 2 and 1:\n%s", got, again, out)
	}
}

// Close stops the store's reading of the policy and waits for it, even
// when a read is in flight on a frozen server.
func TestCloseStopsEvictionWatch(t *testing.T) {
	shortEvictionChecks(t, time.Millisecond)
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	st := must(New(c, WithLogger(quietLogger())))
	awaitEvictionRead(t, st)
	srv.Freeze()
	defer srv.Thaw()
	time.Sleep(50 * time.Millisecond) // a read is waiting for the server
	_ = st.Close(closeCtx())
	select {
	case <-st.guard.evict.done:
	default:
		t.Fatal("Close returned before the eviction watch ended")
	}
	_ = st.Close(closeCtx()) // again: nothing to stop
}

// A server that will not tell its policy (CONFIG renamed away, or an ACL
// user without +config) is reported apart from an evicting one, and a
// store on it trusts Redis, saying once in the log that it could not read
// the policy.
func TestEvictionPolicyUnreadable(t *testing.T) {
	shortEvictionChecks(t, 10*time.Millisecond)
	evicting := []string{"--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"}
	tests := []struct {
		name   string
		client func(t *testing.T) *redis.Client
	}{
		{"CONFIG renamed", func(t *testing.T) *redis.Client {
			srv := redistest.StartServerWith(t, append([]string{"--rename-command", "CONFIG", ""}, evicting...)...)
			return redis.NewClient(&redis.Options{Addr: srv.Addr})
		}},
		{"ACL without config", func(t *testing.T) *redis.Client {
			srv := redistest.StartServerWith(t, evicting...)
			admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
			defer admin.Close()
			if err := admin.Do(context.Background(), "ACL", "SETUSER", "limiter", "on", ">secret-pw", "~*", "&*", "+@all", "-config").Err(); err != nil {
				t.Fatal(err)
			}
			return redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "limiter", Password: "secret-pw"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.client(t)
			t.Cleanup(func() { _ = c.Close() })
			err := CheckEvictionPolicy(context.Background(), c)
			if !errors.Is(err, ErrEvictionPolicyUnreadable) || errors.Is(err, ErrEvictionPolicy) || strings.Contains(err.Error(), "secret-pw") {
				t.Fatalf("CheckEvictionPolicy: %v, want ErrEvictionPolicyUnreadable alone", err)
			}
			var logs syncBuffer
			st := must(New(c, WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))))
			t.Cleanup(func() { _ = st.Close(closeCtx()) })
			awaitEvictionRead(t, st)
			l := mustNew(t, st, algorithms.FixedWindow, algorithms.PerMinute(10))
			if got := deciderOf(t, l, "k"); got != algorithms.DecidedByStore {
				t.Fatalf("decided by %v, want Redis (trusted)", got)
			}
			time.Sleep(100 * time.Millisecond) // about 10 reads more
			out := logs.String()
			if got := strings.Count(out, "could not read Redis's maxmemory-policy"); got != 1 || strings.Contains(out, "secret-pw") {
				t.Fatalf("logged %d times, want once, without the password:\n%s", got, out)
			}
		})
	}
}
