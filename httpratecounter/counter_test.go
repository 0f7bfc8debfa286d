package httpratecounter

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/httprate"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

func TestNewRejectsBadOptions(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = client.Close() })
	cases := []struct {
		name   string
		client redis.UniversalClient
		opts   []Option
	}{
		{"nil client", nil, nil},
		{"empty prefix", client, []Option{WithPrefix("")}},
		{"prefix with an opening brace", client, []Option{WithPrefix("rl{x")}},
		{"prefix with a closing brace", client, []Option{WithPrefix("rl}")}},
		{"zero timeout", client, []Option{WithTimeout(0)}},
		{"negative timeout", client, []Option{WithTimeout(-time.Second)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.client, tc.opts...)
			if !errors.Is(err, algorithms.ErrInvalidOption) || c != nil {
				t.Fatalf("New = %v, %v; want nil and an error wrapping ErrInvalidOption", c, err)
			}
		})
	}
	if _, err := New(client, WithPrefix("api"), WithTimeout(time.Second), WithStrictLimit()); err != nil {
		t.Fatalf("valid options: %v", err)
	}
}

// A configuration that cannot work is reported by Err and returned by every
// call, before Redis is asked anything (the client here reaches no server).
func TestConfigErrors(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	w := time.Now().Truncate(time.Minute)
	cases := []struct {
		name      string
		configure func(c *Counter)
		sentinel  error // besides ErrMisconfigured
	}{
		{"never configured", func(*Counter) {}, nil},
		{"limit 0", func(c *Counter) { c.Config(0, time.Minute) }, algorithms.ErrInvalidLimit},
		{"negative limit", func(c *Counter) { c.Config(-5, time.Minute) }, algorithms.ErrInvalidLimit},
		{"zero window", func(c *Counter) { c.Config(10, 0) }, algorithms.ErrInvalidLimit},
		{"window under 1ms", func(c *Counter) { c.Config(10, 999*time.Microsecond) }, algorithms.ErrInvalidLimit},
		{"window over 366 days", func(c *Counter) { c.Config(10, 200*365*24*time.Hour) }, algorithms.ErrInvalidLimit},
		{"shared by two limiters", func(c *Counter) {
			c.Config(10, time.Minute)
			c.Config(20, time.Minute)
		}, algorithms.ErrInvalidLimit},
		{"the first error stays", func(c *Counter) {
			c.Config(0, time.Minute)
			c.Config(10, time.Minute)
		}, algorithms.ErrInvalidLimit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustNew(t, client)
			tc.configure(c)
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, ErrMisconfigured) || tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
					t.Errorf("%s: %v; want ErrMisconfigured and %v", what, err, tc.sentinel)
				}
			}
			check("Err", c.Err())
			_, _, err := c.Get("k", w, w.Add(-time.Minute))
			check("Get", err)
			check("IncrementBy", c.IncrementBy("k", w, 1))
		})
	}

	c := mustNew(t, client)
	c.Config(10, time.Minute)
	c.Config(10, time.Minute) // the same again: one limiter built twice is fine
	if err := c.Err(); err != nil {
		t.Fatalf("same configuration twice: %v", err)
	}
	if err := c.IncrementBy("k", w, -1); !errors.Is(err, ErrMisconfigured) || !errors.Is(err, algorithms.ErrInvalidCost) {
		t.Fatalf("negative increment: %v; want ErrMisconfigured and ErrInvalidCost", err)
	}
}

var (
	keyPattern  = regexp.MustCompile(`^acct:\{[0-9a-f]{32}\}:[0-9]+$`)
	oncePattern = regexp.MustCompile(`^acct:\{[0-9a-f]{32}\}:once:[0-9A-Za-z_-]+$`)
)

// Counts land in the window named, read back by Get; the Redis keys hold
// only a hash of the httprate key, and expire after two windows and a
// second. Each increment's reply is kept briefly beside them (once.go),
// under the same hashed tag.
func TestCountsAndKeys(t *testing.T) {
	for _, b := range startBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			client := b.newClient(t)
			ctx := context.Background()
			for _, strict := range []bool{false, true} {
				opts := []Option{WithPrefix("acct")}
				if strict {
					opts = append(opts, WithStrictLimit())
				}
				c := mustNew(t, client, opts...)
				const window = 10 * time.Minute
				c.Config(100, window)
				secret := "sk_live_" + strings.Repeat("7", 24)
				cur := time.Now().Truncate(window)
				prev := cur.Add(-window)
				for _, step := range []struct {
					key    string
					w      time.Time
					amount int
				}{{secret, cur, 3}, {secret, cur, 1}, {secret, prev, 5}, {secret, cur, 0}, {"192.0.2.1", cur, 2}} {
					if err := c.IncrementBy(step.key, step.w, step.amount); err != nil {
						t.Fatalf("strict %v: IncrementBy(%q, %d): %v", strict, step.key, step.amount, err)
					}
				}
				if n, p, err := c.Get(secret, cur, prev); err != nil || n != 4 || p != 5 {
					t.Errorf("strict %v: Get(secret) = %d, %d, %v; want 4, 5", strict, n, p, err)
				}
				if n, p, err := c.Get("192.0.2.1", cur, prev); err != nil || n != 2 || p != 0 {
					t.Errorf("strict %v: Get(ip) = %d, %d, %v; want 2, 0", strict, n, p, err)
				}
				if n, p, err := c.Get("nobody", cur, prev); err != nil || n != 0 || p != 0 {
					t.Errorf("strict %v: Get(nobody) = %d, %d, %v; want 0, 0", strict, n, p, err)
				}

				keys, kept := splitKept(allKeys(t, ctx, client))
				if len(kept) != 4 {
					t.Errorf("strict %v: kept replies %v; want one per increment that counted: 4", strict, kept)
				}
				for _, k := range kept {
					ttl, err := client.PTTL(ctx, k).Result()
					if !oncePattern.MatchString(k) || err != nil || ttl <= 0 || ttl > onceTTL(testTimeout) {
						t.Errorf("strict %v: kept reply %q for %v (%v); want prefix, hashed tag, id, within %v", strict, k, ttl, err, onceTTL(testTimeout))
					}
				}
				if len(keys) != 3 {
					t.Errorf("strict %v: keys %v; want 3 (two windows of one key, one of another)", strict, keys)
				}
				for _, k := range keys {
					if !keyPattern.MatchString(k) || strings.Contains(k, "sk_live") || strings.Contains(k, "192.0.2.1") {
						t.Errorf("strict %v: key %q: want prefix, hashed tag, window and no raw key", strict, k)
					}
					ttl, err := client.PTTL(ctx, k).Result()
					if err != nil || ttl <= 2*window || ttl > 2*window+ttlMargin {
						t.Errorf("strict %v: PTTL(%s) = %v, %v; want in (%v, %v]", strict, k, ttl, err, 2*window, 2*window+ttlMargin)
					}
				}
				for _, k := range append(keys, kept...) { // one by one: on Cluster they lie in different slots
					if err := client.Del(ctx, k).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// splitKept separates the keys that keep increments' replies from the
// rest.
func splitKept(all []string) (keys, kept []string) {
	for _, k := range all {
		if strings.Contains(k, ":once:") {
			kept = append(kept, k)
		} else {
			keys = append(keys, k)
		}
	}
	return keys, kept
}

// allKeys lists every key, on every master of a Cluster.
func allKeys(t *testing.T, ctx context.Context, client redis.UniversalClient) []string {
	t.Helper()
	var keys []string
	scan := func(ctx context.Context, c *redis.Client) error {
		ks, err := c.Keys(ctx, "*").Result()
		keys = append(keys, ks...)
		return err
	}
	var err error
	switch c := client.(type) {
	case *redis.ClusterClient:
		ch := make(chan []string, 16)
		err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			ks, err := m.Keys(ctx, "*").Result()
			ch <- ks
			return err
		})
		close(ch)
		for ks := range ch {
			keys = append(keys, ks...)
		}
	case *redis.Client:
		err = scan(ctx, c)
	default:
		t.Fatalf("unexpected client %T", client)
	}
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// Under WithStrictLimit the script weighs the previous window by Redis's
// clock against the window's start as named: the test names windows whose
// elapsed share it knows, and a window named by a clock far off either
// way is clamped to the window.
func TestStrictWeighsOnRedisClock(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
	t.Cleanup(func() { _ = client.Close() })
	ctx := context.Background()
	const window = time.Hour
	cases := []struct {
		name    string
		elapsed time.Duration // Redis's now minus the named window's start
		want    int           // amounts of 1 admitted: limit 10, previous 8
	}{
		{"a quarter gone: 6 of the previous count weigh", window / 4, 4},
		{"three quarters gone: 2 weigh", 3 * window / 4, 8},
		{"named by a clock 10 minutes ahead: all 8 weigh", -10 * time.Minute, 2},
		{"named by a clock 2 windows behind: none weighs", 2 * window, 10},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustNew(t, client, WithStrictLimit(), WithPrefix("strict"+string(rune('a'+i))))
			c.Config(10, window)
			now, err := client.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			cur := now.Add(-tc.elapsed)
			if err := c.IncrementBy("k", cur.Add(-window), 8); err != nil {
				t.Fatal(err)
			}
			admitted := 0
			for range 12 {
				switch err := c.IncrementBy("k", cur, 1); {
				case err == nil:
					admitted++
				case !errors.Is(err, ErrLimitExceeded):
					t.Fatal(err)
				}
			}
			n, _, err := c.Get("k", cur, cur.Add(-window))
			if admitted != tc.want || n != tc.want || err != nil {
				t.Fatalf("admitted %d, counted %d (%v); want %d: a refused increment writes nothing", admitted, n, err, tc.want)
			}
			// An amount larger than the room left is refused whole.
			if tc.want < 10 {
				c2 := mustNew(t, client, WithStrictLimit(), WithPrefix("strict-big"+string(rune('a'+i))))
				c2.Config(10, window)
				if err := c2.IncrementBy("k", cur.Add(-window), 8); err != nil {
					t.Fatal(err)
				}
				if err := c2.IncrementBy("k", cur, tc.want+1); !errors.Is(err, ErrLimitExceeded) {
					t.Fatalf("amount %d with room for %d: %v; want ErrLimitExceeded", tc.want+1, tc.want, err)
				}
			}
		})
	}
}

// A counter that does not hold a count is an error, not a zero.
func TestCorruptCounter(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
	t.Cleanup(func() { _ = client.Close() })
	ctx := context.Background()
	const window = time.Minute
	cur := time.Now().Truncate(window)
	for _, strict := range []bool{false, true} {
		opts := []Option{}
		if strict {
			opts = append(opts, WithStrictLimit())
		}
		c := mustNew(t, client, opts...)
		c.Config(10, window)
		if err := client.Set(ctx, c.keyOf(hashOf("k"), cur), "lots", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Get("k", cur, cur.Add(-window)); !errors.Is(err, ErrUnavailable) || !errors.Is(err, redisstore.ErrUnexpectedReply) {
			t.Errorf("strict %v: Get: %v; want ErrUnavailable and ErrUnexpectedReply", strict, err)
		}
		if err := c.IncrementBy("k", cur, 1); !errors.Is(err, ErrUnavailable) {
			t.Errorf("strict %v: IncrementBy: %v; want ErrUnavailable", strict, err)
		}
	}
}

// After SCRIPT FLUSH (what a restart or a failover does to the script
// cache) the next increment loads the script again and counts.
func TestScriptCacheFlushed(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
	t.Cleanup(func() { _ = client.Close() })
	ctx := context.Background()
	cur := time.Now().Truncate(time.Minute)
	for _, strict := range []bool{false, true} {
		opts := []Option{WithPrefix("flush" + map[bool]string{false: "p", true: "s"}[strict])}
		if strict {
			opts = append(opts, WithStrictLimit())
		}
		c := mustNew(t, client, opts...)
		c.Config(10, time.Minute)
		for i := range 3 {
			if err := client.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.Increment("k", cur); err != nil {
				t.Fatalf("strict %v: increment %d after SCRIPT FLUSH: %v", strict, i+1, err)
			}
		}
		if n, _, err := c.Get("k", cur, cur.Add(-time.Minute)); n != 3 || err != nil {
			t.Fatalf("strict %v: count %d, %v; want 3", strict, n, err)
		}
	}
}

// Redis stopped or frozen: every call returns ErrUnavailable, a frozen one
// within the Counter's timeout although the client would wait seconds.
func TestRedisFailure(t *testing.T) {
	srv := redistest.StartServer(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr}) // default 3s read timeout
	t.Cleanup(func() { _ = client.Close() })
	const timeout = 50 * time.Millisecond
	c := mustNew(t, client, WithTimeout(timeout))
	c.Config(10, time.Minute)
	cur := time.Now().Truncate(time.Minute)
	if err := c.Increment("k", cur); err != nil {
		t.Fatal(err)
	}

	srv.Freeze()
	t.Cleanup(srv.Thaw) // before the server's own cleanup stops it
	for _, call := range []struct {
		name string
		f    func() error
	}{
		{"Get", func() error { _, _, err := c.Get("k", cur, cur.Add(-time.Minute)); return err }},
		{"IncrementBy", func() error { return c.IncrementBy("k", cur, 1) }},
	} {
		start := time.Now()
		err := call.f()
		took := time.Since(start)
		if !errors.Is(err, ErrUnavailable) || took > timeout+500*time.Millisecond {
			t.Errorf("frozen: %s = %v after %v; want ErrUnavailable within about %v", call.name, err, took, timeout)
		}
	}
	srv.Thaw()

	srv.Stop()
	if _, _, err := c.Get("k", cur, cur.Add(-time.Minute)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("stopped: Get = %v; want ErrUnavailable", err)
	}
	if err := c.IncrementBy("k", cur, 1); !errors.Is(err, ErrUnavailable) {
		t.Errorf("stopped: IncrementBy = %v; want ErrUnavailable", err)
	}
}

// A frozen Redis costs httprate's serialized requests one timeout each only
// until the breaker opens; then they are refused at once, and once Redis
// answers again a probe closes the breaker.
func TestBreakerKeepsRequestsFast(t *testing.T) {
	srv := redistest.StartServer(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = client.Close() })
	const timeout, requests = 100 * time.Millisecond, 30
	c := mustNew(t, client, WithTimeout(timeout))
	h := httprate.LimitBy(1000, time.Hour, httprate.Key("k"), c.Options()...)(ok)
	if got := send(h, "GET", "/", "192.0.2.1:1").code; got != 200 {
		t.Fatalf("Redis up: %d", got)
	}

	srv.Freeze()
	t.Cleanup(srv.Thaw)
	start := time.Now()
	for i := range requests {
		if got := send(h, "GET", "/", "192.0.2.1:1").code; got != 503 {
			t.Fatalf("frozen, request %d: %d; want 503", i+1, got)
		}
	}
	took := time.Since(start)
	// Five timeouts open the breaker; without it, 30 would be spent.
	if took > 10*timeout {
		t.Errorf("%d requests on a frozen Redis took %v; want the breaker to stop at about %v", requests, took, 5*timeout)
	}
	t.Logf("%d requests on a frozen Redis answered 503 in %v", requests, took)

	srv.Thaw()
	deadline := time.Now().Add(5 * time.Second)
	for send(h, "GET", "/", "192.0.2.1:1").code != 200 {
		if time.Now().After(deadline) {
			t.Fatal("no request admitted within 5s of Redis answering again")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
