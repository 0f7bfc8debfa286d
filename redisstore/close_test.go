package redisstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
	"github.com/redlimit/redlimit/internal/redistest"
)

// codeGoroutines returns the stacks of the goroutines that run redlimit's
// code (and, with goRedis, go-redis's), leaving out the tests' own and the
// test servers' helpers.
func codeGoroutines(goRedis bool) []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "testing.tRunner") || strings.Contains(g, "_test.go") || strings.Contains(g, "internal/redistest") {
			continue
		}
		if strings.Contains(g, "github.com/redlimit/redlimit/") || goRedis && strings.Contains(g, "github.com/redis/go-redis/") {
			out = append(out, g)
		}
	}
	return out
}

// exercise starts what a store runs in the background: flushers (the
// client does not honour deadlines, so every decision goes through one),
// the denial cache's subscription, single calls (Peek, Acquire), and
// returns a limiter, a concurrency limiter and a lease it holds.
func exercise(t *testing.T, st *Store) (algorithms.RateLimiter, algorithms.ConcurrencyLimiter, *algorithms.Lease) {
	t.Helper()
	ctx := context.Background()
	l, err := algorithms.New(st, algorithms.FixedWindow, algorithms.PerMinute(2))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		_, _ = l.Allow(ctx, fmt.Sprint("k", i%5), 1) // k0..k4 denied from the third on: cached
	}
	_, _ = l.Peek(ctx, "k0")
	cl := mustConcurrency(t, st, 5, time.Minute)
	return l, cl, mustAcquire(t, cl, "c")
}

// Close leaves no goroutine of the store's, with Redis healthy, paused
// (frozen, its connections open and silent) or stopped, on a client that
// honours a context's deadline and on one that does not (whose calls in
// a paused Redis end at its ReadTimeout, readTimeout): every goroutine of
// redlimit's code is gone when Close returns, and go-redis's once the
// client, closed after the store, is. What the store owes is sent while
// Redis answers, and reported (ErrUnsent) when it cannot.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	faults := []struct {
		name   string
		fault  func(*redistest.Server)
		undo   func(*redistest.Server)
		unsent bool
	}{
		{"healthy", func(*redistest.Server) {}, func(*redistest.Server) {}, false},
		{"paused", (*redistest.Server).Freeze, (*redistest.Server).Thaw, true},
		{"stopped", (*redistest.Server).Kill, func(*redistest.Server) {}, true},
	}
	const readTimeout = time.Second
	for _, deadlines := range []bool{true, false} {
		for _, tc := range faults {
			t.Run(fmt.Sprintf("%s/ContextTimeoutEnabled=%v", tc.name, deadlines), func(t *testing.T) {
				srv := redistest.StartServer(t)
				before, beforeAll := len(codeGoroutines(false)), len(codeGoroutines(true))
				c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: deadlines, ReadTimeout: readTimeout})
				st := must(New(c, WithTimeout(50*time.Millisecond), WithLogger(quietLogger())))
				l, cl, lease := exercise(t, st)
				tc.fault(srv)
				defer tc.undo(srv)
				inFault(t, l, cl, lease)
				if running := len(codeGoroutines(false)); running <= before {
					t.Fatalf("%d goroutines of redlimit's before New, %d before Close: the store started none", before, running)
				}

				// Calls stuck in a paused Redis on a client that ignores
				// deadlines end at its ReadTimeout, which Close waits for,
				// and one Close sends may end that long after ctx; ctx
				// outlasts the ReadTimeout, so Close gets past that wait.
				const wait = readTimeout + 500*time.Millisecond
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				most := wait + time.Second
				if !deadlines {
					most += readTimeout
				}
				began := time.Now()
				err := st.Close(ctx)
				if d := time.Since(began); d > most {
					t.Errorf("Close took %s with a context of %s", d, wait)
				}
				if tc.unsent != errors.Is(err, ErrUnsent) || !tc.unsent && err != nil {
					t.Errorf("Close: %v; want ErrUnsent: %v", err, tc.unsent)
				}
				if left := codeGoroutines(false); len(left) > before {
					t.Fatalf("%d goroutines of redlimit's before New, %d after Close:\n%s", before, len(left), strings.Join(left, "\n\n"))
				}
				if err := st.Close(context.Background()); err != nil {
					t.Errorf("second Close: %v", err)
				}
				_ = c.Close()
				var left []string
				for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					if left = codeGoroutines(true); len(left) <= beforeAll {
						return
					}
				}
				t.Fatalf("%d goroutines of redlimit's and go-redis's before New, %d after Close and the client's Close:\n%s",
					beforeAll, len(left), strings.Join(left, "\n\n"))
			})
		}
	}
}

// inFault starts, in a fault, what a fault starts: owed charges (the
// settler), a release owed (the release line), single calls.
func inFault(t *testing.T, l algorithms.RateLimiter, cl algorithms.ConcurrencyLimiter, lease *algorithms.Lease) {
	t.Helper()
	ctx := context.Background()
	for i := range 10 {
		_, _ = l.Allow(ctx, fmt.Sprint("fault", i), 1)
	}
	_ = lease.Release(ctx)
	_, _ = l.Peek(ctx, "k1")
	_, _ = cl.Acquire(ctx, "c2")
}

// Close sends what the twin admitted during a fault: when Redis comes back
// before Close's context ends the charges land in Redis, and Close returns
// nil; when it does not, Close returns ErrUnsent with how many keys'
// charges and leases it could not send, and names none of the keys.
func TestCloseSettlesOwed(t *testing.T) {
	lim := algorithms.PerMinute(10)
	for _, tc := range []struct {
		name string
		back bool // Redis restarts while Close tries
	}{
		{"redis back within the context", true},
		{"redis still down when the context ends", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
			defer c.Close()
			st := must(New(c, WithTimeout(50*time.Millisecond), WithLogger(quietLogger()), WithPrefix("settle")))
			l, err := algorithms.New(st, algorithms.FixedWindow, lim)
			if err != nil {
				t.Fatal(err)
			}
			cl := mustConcurrency(t, st, 5, time.Minute)
			ctx := context.Background()
			lease := mustAcquire(t, cl, "lease-holder")
			srv.Kill()
			// The pool's connections are dead: once they are gone, a call
			// dials, is refused, and so never reached Redis (a call written
			// on a dead connection may have run: it owes nothing).
			for i := 0; i < 10 && !strings.Contains(fmt.Sprint(c.Ping(ctx).Err()), "refused"); i++ {
			}
			keys := []string{"secret-a", "secret-b", "secret-c"}
			for _, k := range keys {
				if res, err := l.Allow(ctx, k, 3); err != nil || !res.Allowed || res.Decider != algorithms.DecidedLocally {
					t.Fatalf("Allow(%s) with Redis stopped: %+v, %v; want admitted locally", k, res, err)
				}
			}
			if err := lease.Release(ctx); err == nil {
				t.Fatal("Release with Redis stopped: nil error")
			}

			timeout := 300 * time.Millisecond
			if tc.back {
				timeout = 10 * time.Second
			}
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			closed := make(chan error, 1)
			began := time.Now()
			go func() { closed <- st.Close(cctx) }()
			if tc.back {
				time.Sleep(200 * time.Millisecond)
				srv.Restart()
			}
			err = <-closed
			took := time.Since(began)
			if !tc.back {
				if !errors.Is(err, ErrUnsent) || !strings.Contains(err.Error(), "3 keys' charges and 1 concurrency leases") {
					t.Fatalf("Close: %v; want ErrUnsent for 3 keys' charges and 1 concurrency leases", err)
				}
				for _, k := range keys {
					if strings.Contains(err.Error(), k) {
						t.Errorf("Close's error %q names the key %s", err, k)
					}
				}
				if took > timeout+time.Second {
					t.Errorf("Close took %s with a context of %s", took, timeout)
				}
				return
			}
			if err != nil {
				t.Fatalf("Close with Redis back: %v", err)
			}
			for _, k := range keys {
				key := "settle:{" + k + "}:" + ratemath.StateName(algorithms.FixedWindow, lim)
				if state := stateOf(ctx, t, c, key); !strings.Contains(state, "3") {
					t.Errorf("%s after Close: %q; want the charge of 3 counted", key, state)
				}
			}
		})
	}
}

// After Close a store's limiters decide by its failure mode, at once (no
// call to Redis, whatever the store's timeout), and send Redis nothing;
// what has no failure mode (Peek, Reset, a lease's Release) returns
// ErrClosed; nothing hangs or panics.
func TestCloseThenFailureMode(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	const timeout = 200 * time.Millisecond
	for _, tc := range []struct {
		mode    FailureMode
		allowed []bool
		decider algorithms.Decider
	}{
		{FailLocal, []bool{true, true, false}, algorithms.DecidedLocally},
		{FailOpen, []bool{true, true, true}, algorithms.DecidedFailOpen},
		{FailClosed, []bool{false, false, false}, algorithms.DecidedFailClosed},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			prefix := "closed-" + tc.mode.String()
			st := must(New(c, WithFailureMode(tc.mode), WithTimeout(timeout), WithLogger(quietLogger()), WithPrefix(prefix)))
			l, err := algorithms.New(st, algorithms.TokenBucket, algorithms.PerMinute(2))
			if err != nil {
				t.Fatal(err)
			}
			cl := mustConcurrency(t, st, 1, time.Minute)
			ctx := context.Background()
			lease := mustAcquire(t, cl, "held")
			if err := st.Close(ctx); err != nil {
				t.Fatalf("Close with Redis healthy: %v", err)
			}
			keysBefore, err := c.Keys(ctx, prefix+":*").Result()
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.allowed {
				began := time.Now()
				res, err := l.Allow(ctx, "k", 1)
				if d := time.Since(began); d >= timeout {
					t.Errorf("Allow %d after Close took %s, the store's timeout is %s", i, d, timeout)
				}
				if err != nil || res.Allowed != want || res.Decider != tc.decider {
					t.Errorf("Allow %d after Close: %+v, %v; want allowed %v by %v", i, res, err, want, tc.decider)
				}
			}
			if got, err := cl.Acquire(ctx, "other"); err != nil || got.Decider != tc.decider {
				t.Errorf("Acquire after Close: %+v, %v; want decided by %v", got, err, tc.decider)
			}
			if _, err := l.Peek(ctx, "k"); !errors.Is(err, ErrClosed) {
				t.Errorf("Peek after Close: %v; want ErrClosed", err)
			}
			if err := l.Reset(ctx, "k"); !errors.Is(err, ErrClosed) {
				t.Errorf("Reset after Close: %v; want ErrClosed", err)
			}
			if err := lease.Release(ctx); !errors.Is(err, ErrClosed) {
				t.Errorf("Release after Close: %v; want ErrClosed", err)
			}
			_, _ = l.Reserve(ctx, "k", 1, time.Second)
			_, _ = l.Charge(ctx, "k", 1)
			_, _ = l.Refund(ctx, "k", 1, 0)
			if keys, err := c.Keys(ctx, prefix+":*").Result(); err != nil || len(keys) != len(keysBefore) {
				t.Errorf("keys under %s: %v before the calls after Close, %v after (%v)", prefix, keysBefore, keys, err)
			}
			if err := st.Close(ctx); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}
