package redisstore

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
	"github.com/redlimit/redlimit/internal/redistest"
)

// 4 clients, standing for 4 application instances, × 50 goroutines send
// 1000 requests for one key with a limit of 100: exactly 100 pass. All
// requests fall in one window, where the sliding window counter is exact
// too (its estimate only errs across windows). The deadline is long, so
// that a loaded machine does not hand decisions to the local twin.
func testExactUnderConcurrency(t *testing.T, newClient func() redis.UniversalClient) {
	const clients, goroutines, requests, limit = 4, 50, 1000, 100
	cs := make([]redis.UniversalClient, clients)
	for i := range cs {
		cs[i] = newClient()
		t.Cleanup(func() { cs[i].Close() })
	}
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			limiters := make([]algorithms.Limiter, clients)
			for i, c := range cs {
				l, err := algorithms.New(must(New(c, WithPrefix("conc"), WithTimeout(10*time.Second))), alg, algorithms.PerHour(limit))
				if err != nil {
					t.Fatal(err)
				}
				limiters[i] = l
			}
			var allowed, denied, sent atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, clients*goroutines)
			for i := range clients * goroutines {
				l := limiters[i%clients]
				wg.Go(func() {
					for sent.Add(1) <= requests {
						r, err := l.Allow(context.Background(), "shared", 1)
						if err != nil {
							errs <- err
							return
						}
						if r.Allowed {
							allowed.Add(1)
						} else {
							denied.Add(1)
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if allowed.Load() != limit || allowed.Load()+denied.Load() != requests {
				t.Fatalf("allowed %d and denied %d of %d, want exactly %d allowed", allowed.Load(), denied.Load(), requests, limit)
			}
		})
	}
}

func TestRedisExactUnderConcurrency(t *testing.T) {
	addr := redistest.Standalone(t)
	testExactUnderConcurrency(t, func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: addr}) })
}

func TestClusterExactUnderConcurrency(t *testing.T) {
	addrs := redistest.Cluster(t)
	testExactUnderConcurrency(t, func() redis.UniversalClient {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	})
}

// commandCounter counts the commands a client sends.
type commandCounter struct {
	mu   sync.Mutex
	cmds []string
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.cmds = append(c.cmds, strings.ToLower(cmd.Name()))
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (c *commandCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	cmds := c.cmds
	c.cmds = nil
	return cmds
}

// Each decision is one EVALSHA; after SCRIPT FLUSH (a restart or failover
// loses the script cache) the next one falls back to EVAL once, and the
// decision is still made. Every key written carries a TTL no longer than its
// state needs.
func TestRedisOneRoundTripAndTTLs(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	counter := &commandCounter{}
	c.AddHook(counter)
	ctx := context.Background()
	for _, alg := range algorithms.All() {
		limits := []algorithms.Limit{algorithms.PerSecond(5), {Rate: 50, Period: 10 * time.Second, Burst: 60}}
		// Without the denial cache, which answers repeated denials itself.
		l, err := algorithms.New(must(New(c, WithDenialCache(0))), alg, limits...)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		counter.take()
		if _, err := l.Allow(ctx, "rt", 2); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(counter.take(), ","); got != "evalsha,eval" {
			t.Errorf("%s: first decision after SCRIPT FLUSH sent %q, want evalsha,eval", alg, got)
		}
		for range 10 {
			if _, err := l.Allow(ctx, "rt", 1); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(counter.take(), ","); got != "evalsha" {
				t.Fatalf("%s: a decision sent %q, want one evalsha", alg, got)
			}
		}
		keys, err := c.Keys(ctx, "rl:{rt}:"+ratemath.Code(alg)+":*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != len(limits) {
			t.Fatalf("%s: keys %v, want one per limit", alg, keys)
		}
		for _, k := range keys {
			ttl, err := c.PTTL(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			// The longest state here is the sliding counter's two windows.
			if ttl <= 0 || ttl > 20*time.Second {
				t.Errorf("%s: key %s has TTL %s, want within (0, 20s]", alg, k, ttl)
			}
		}
	}
	// Keys made by Allow carry the caller's key as the hash tag.
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "rl:{rt}:") {
			t.Errorf("unexpected key %q", k)
		}
		if ttl := c.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("key %s has no TTL (%s)", k, ttl)
		}
	}
}

// The sliding window log counts every unit of a cost, in the same
// microsecond or not, and holds one member per admission, whatever its
// cost.
func TestRedisSlidingLogBounded(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	l, err := algorithms.New(must(New(c)), algorithms.SlidingWindowLog, algorithms.PerMinute(250))
	if err != nil {
		t.Fatal(err)
	}
	passed := 0
	for range 100 {
		r, err := l.Allow(ctx, "log", 7)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			passed += 7
		}
	}
	n, err := c.ZCard(ctx, "rl:{log}:swl:250:60000000").Result()
	if err != nil {
		t.Fatal(err)
	}
	if passed != 245 || n != 35 {
		t.Fatalf("passed %d units, log holds %d members; want 245 units in 35 members", passed, n)
	}
}

// A Redis that cannot be reached never turns the limit off: each failure
// mode answers at once, without an error, and says what decided.
func TestRedisUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens here now
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * ms})
	defer c.Close()
	for _, tc := range []struct {
		mode    FailureMode
		passed  int
		decider algorithms.Decider
	}{
		{FailLocal, 2, algorithms.DecidedLocally},
		{FailOpen, 5, algorithms.DecidedFailOpen},
		{FailClosed, 0, algorithms.DecidedFailClosed},
	} {
		l, err := algorithms.New(must(New(c, WithFailureMode(tc.mode))), algorithms.TokenBucket, algorithms.PerMinute(2))
		if err != nil {
			t.Fatal(err)
		}
		passed := 0
		for range 5 {
			began := time.Now()
			r, err := l.Allow(context.Background(), "k", 1)
			if err != nil {
				t.Fatalf("%s: %v", tc.mode, err)
			}
			if r.Decider != tc.decider {
				t.Errorf("%s: decided by %s, want %s", tc.mode, r.Decider, tc.decider)
			}
			if d := time.Since(began); d > DefaultTimeout+50*ms {
				t.Errorf("%s: took %s", tc.mode, d)
			}
			if r.Allowed {
				passed++
			}
		}
		if passed != tc.passed {
			t.Errorf("%s: %d of 5 passed, want %d", tc.mode, passed, tc.passed)
		}
	}
}

// A nil context, which Go's conventions forbid, is taken as Background
// rather than a panic.
func TestRedisNilContext(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	l, err := algorithms.New(must(New(c)), algorithms.FixedWindow, algorithms.PerMinute(2))
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	if r, err := l.Allow(nilCtx, "k", 1); err != nil || !r.Allowed || r.Decider != algorithms.DecidedByStore {
		t.Fatalf("Allow: %+v, %v", r, err)
	}
	if r, err := l.Peek(nilCtx, "k"); err != nil || r.Remaining != 0 {
		t.Fatalf("Peek: %+v, %v", r, err)
	}
	if err := l.Reset(nilCtx, "k"); err != nil {
		t.Fatal(err)
	}
}
