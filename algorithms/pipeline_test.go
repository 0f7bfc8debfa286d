package algorithms

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
)

// tripCounter counts round trips (a command alone, or a pipeline) and the
// script commands they carry; round trips without scripts (a connection's
// setup) are not counted.
type tripCounter struct {
	mu           sync.Mutex
	trips, cmds  int
	largestTrip  int
	pipelineCmds map[string]int
}

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			c.mu.Lock()
			c.trips++
			c.cmds++
			c.largestTrip = max(c.largestTrip, 1)
			c.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}
func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		c.mu.Lock()
		for _, cmd := range cmds {
			if isScript(cmd) {
				n++
				c.pipelineCmds[cmd.Name()]++
			}
		}
		if n > 0 {
			c.trips++
			c.cmds += n
			c.largestTrip = max(c.largestTrip, n)
		}
		c.mu.Unlock()
		return next(ctx, cmds)
	}
}

func isScript(cmd redis.Cmder) bool { return cmd.Name() == "evalsha" || cmd.Name() == "eval" }

// Concurrent decisions for many keys travel in pipelines, each key with
// its own exact answer, and scripts Redis lost are sent again in full.
func TestPipelinedKeys(t *testing.T) {
	addr := redistest.Standalone(t)
	for _, flush := range []bool{false, true} {
		t.Run(fmt.Sprint("script flush ", flush), func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			defer c.Close()
			counter := &tripCounter{pipelineCmds: map[string]int{}}
			c.AddHook(counter)
			ctx := context.Background()
			// Two flushers for 400 keys: the keys queue and go in pipelines.
			store := NewRedisStore(c, WithMaxInFlight(2), WithDenialCache(0), WithPrefix(fmt.Sprint("p", flush)), WithLogger(quietLogger()))
			l, err := New(store, FixedWindow, PerMinute(1))
			if err != nil {
				t.Fatal(err)
			}
			if flush {
				if err := c.ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			const keys = 400
			var wg sync.WaitGroup
			results := make([][2]Result, keys)
			for i := range keys {
				wg.Go(func() {
					for j := range 2 {
						r, err := l.Allow(ctx, fmt.Sprint("k", i), 1)
						if err != nil {
							t.Error(err)
						}
						results[i][j] = r
					}
				})
			}
			wg.Wait()
			for i, r := range results {
				if !r[0].Allowed || r[1].Allowed || r[0].Decider != DecidedByStore || r[1].Decider != DecidedByStore {
					t.Fatalf("key %d: %+v then %+v, want allowed then denied, by Redis", i, r[0], r[1])
				}
			}
			counter.mu.Lock()
			defer counter.mu.Unlock()
			if counter.largestTrip < 2 || counter.trips >= 2*keys {
				t.Errorf("%d decisions in %d round trips (largest %d commands): no pipelining", 2*keys, counter.trips, counter.largestTrip)
			}
			t.Logf("%d decisions, %d round trips, largest %d commands", 2*keys, counter.trips, counter.largestTrip)
		})
	}
}

// With batching off every decision is one EVALSHA of its own.
func TestBatchingOff(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	counter := &tripCounter{pipelineCmds: map[string]int{}}
	c.AddHook(counter)
	l, err := New(NewRedisStore(c, WithBatching(false), WithDenialCache(0), WithMaxInFlight(2)), FixedWindow, PerMinute(50))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Allow(ctx, "warm", 1); err != nil { // load the script
		t.Fatal(err)
	}
	counter.mu.Lock()
	counter.trips, counter.cmds = 0, 0
	counter.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 100 {
		wg.Go(func() {
			r, err := l.Allow(ctx, "one key", 1)
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
	counter.mu.Lock()
	defer counter.mu.Unlock()
	if allowed != 50 {
		t.Errorf("%d admitted, want 50", allowed)
	}
	if counter.trips != counter.cmds || counter.largestTrip != 1 || counter.cmds != 100 {
		t.Errorf("%d commands in %d round trips (largest %d), want one command per decision", counter.cmds, counter.trips, counter.largestTrip)
	}
}

// A pipeline whose scripts Redis has lost (SCRIPT FLUSH, a restart, a
// failover) sends them again in full, and every key is decided once.
func TestPipelineReloadsScripts(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	counter := &tripCounter{pipelineCmds: map[string]int{}}
	c.AddHook(counter)
	ctx := context.Background()
	lim, err := New(NewRedisStore(c), TokenBucket, PerMinute(3))
	if err != nil {
		t.Fatal(err)
	}
	l := lim.(*redisLimiter)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	jobs := []*job{{l: l, key: "a", costs: []int{1}}, {l: l, key: "b", costs: []int{2, 2}}, {l: l, key: "c", costs: []int{4}}}
	if err := run(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	if counter.pipelineCmds["evalsha"] != 3 || counter.pipelineCmds["eval"] != 3 {
		t.Errorf("commands %v, want 3 EVALSHA refused, then 3 EVAL", counter.pipelineCmds)
	}
	for _, j := range jobs {
		if j.err != nil {
			t.Fatalf("%s: %v", j.key, j.err)
		}
	}
	if a, b, cc := jobs[0].results, jobs[1].results, jobs[2].results; !a[0].Allowed || !b[0].Allowed || b[1].Allowed || cc[0].Allowed {
		t.Errorf("results %+v %+v %+v", a, b, cc)
	}
	// Decided once each: a has 2 left.
	if r, err := l.Peek(ctx, "a"); err != nil || r.Remaining != 1 {
		t.Errorf("peek a: %+v %v, want 1 left after the peeked request", r, err)
	}
}
