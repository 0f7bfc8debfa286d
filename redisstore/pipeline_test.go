package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// tripCounter counts round trips (a command alone, or a pipeline) and the
// script commands they carry; round trips without scripts (a connection's
// setup) are not counted.
type tripCounter struct {
	mu           sync.Mutex
	trips, cmds  int
	largestTrip  int
	largestCall  int // most keys in one script command
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
			c.largestCall = max(c.largestCall, keyCount(cmd))
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
				c.largestCall = max(c.largestCall, keyCount(cmd))
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

// keyCount is the number of keys a script command carries.
func keyCount(cmd redis.Cmder) int {
	n, _ := cmd.Args()[2].(int)
	return n
}

// Concurrent decisions for many keys go to Redis together, several keys
// in one script call (any keys on a single server, one slot's on
// Cluster), each key with its own exact answer; scripts Redis lost are
// sent again in full.
func TestPipelinedKeys(t *testing.T) {
	const keys = 400
	addr := redistest.Standalone(t)
	cluster := redistest.Cluster(t)
	for _, tc := range []struct {
		name    string
		flush   bool
		cluster bool
	}{{"single server", false, false}, {"single server, script flush", true, false}, {"cluster", false, true}} {
		flush := tc.flush
		t.Run(tc.name, func(t *testing.T) {
			counter := &tripCounter{pipelineCmds: map[string]int{}}
			var c redis.UniversalClient
			if tc.cluster {
				// The nodes' clients carry the commands, split by slot.
				cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster, MaxRedirects: -1})
				cc.OnNewNode(func(n *redis.Client) { n.AddHook(counter) })
				c = cc
			} else {
				c = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
				c.AddHook(counter)
			}
			defer c.Close()
			ctx := context.Background()
			// Two flushers for 400 keys: the keys queue and go in pipelines.
			store := must(New(c, WithMaxInFlight(2), WithDenialCache(0), WithPrefix(fmt.Sprint("p", flush)), WithLogger(quietLogger())))
			names := make([]string, 0, keys)
			for i := 0; len(names) < keys; i++ {
				// On Cluster, keys of four slots, so that calls can group them.
				if k := fmt.Sprint("k", i); !tc.cluster || clusterSlot(k)%4096 == 7 {
					names = append(names, k)
				}
			}
			l, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(1))
			if err != nil {
				t.Fatal(err)
			}
			if flush {
				if err := c.ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			results := make([][2]algorithms.Result, keys)
			for i := range keys {
				wg.Go(func() {
					for j := range 2 {
						r, err := l.Allow(ctx, names[i], 1)
						if err != nil {
							t.Error(err)
						}
						results[i][j] = r
					}
				})
			}
			wg.Wait()
			for i, r := range results {
				if !r[0].Allowed || r[1].Allowed || r[0].Decider != algorithms.DecidedByStore || r[1].Decider != algorithms.DecidedByStore {
					t.Fatalf("key %d: %+v then %+v, want allowed then denied, by Redis", i, r[0], r[1])
				}
			}
			counter.mu.Lock()
			defer counter.mu.Unlock()
			if counter.cmds >= 2*keys || counter.largestCall < 2 {
				t.Errorf("%d decisions in %d script commands (at most %d keys in one): no batching", 2*keys, counter.cmds, counter.largestCall)
			}
			t.Logf("%d decisions, %d round trips, %d script commands, at most %d keys in one", 2*keys, counter.trips, counter.cmds, counter.largestCall)
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
	l, err := algorithms.New(must(New(c, WithBatching(false), WithDenialCache(0), WithMaxInFlight(2))), algorithms.FixedWindow, algorithms.PerMinute(50))
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
// failover) sends them again in full, and every key is decided once: the
// keys of one limiter in one call, another limiter's in a call of its own.
func TestPipelineReloadsScripts(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	counter := &tripCounter{pipelineCmds: map[string]int{}}
	c.AddHook(counter)
	ctx := context.Background()
	lim, err := algorithms.New(must(New(c)), algorithms.TokenBucket, algorithms.PerMinute(3))
	if err != nil {
		t.Fatal(err)
	}
	other, err := algorithms.New(must(New(c)), algorithms.FixedWindow, algorithms.PerMinute(1))
	if err != nil {
		t.Fatal(err)
	}
	l, o := lim.(*redisLimiter), other.(*redisLimiter)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	jobs := []*job{{l: l, key: "a", costs: []int{1}}, {l: o, key: "x", costs: []int{1, 1}},
		{l: l, key: "b", costs: []int{2, 2}}, {l: l, key: "c", costs: []int{4}}}
	if err := run(ctx, jobs, nil); err != nil {
		t.Fatal(err)
	}
	if counter.pipelineCmds["evalsha"] != 2 || counter.pipelineCmds["eval"] != 2 || counter.largestCall != 3 {
		t.Errorf("commands %v, at most %d keys in one: want 2 EVALSHA refused, then 2 EVAL, one of them for 3 keys (no reply key: the client never resends)",
			counter.pipelineCmds, counter.largestCall)
	}
	for _, j := range jobs {
		if j.err != nil {
			t.Fatalf("%s: %v", j.key, j.err)
		}
	}
	if a, x, b, cc := jobs[0].results, jobs[1].results, jobs[2].results, jobs[3].results; !a[0].Allowed || !x[0].Allowed || x[1].Allowed ||
		!b[0].Allowed || b[1].Allowed || cc[0].Allowed {
		t.Errorf("results %+v %+v %+v %+v", a, x, b, cc)
	}
	// Decided once each: a has 2 left.
	if r, err := l.Peek(ctx, "a"); err != nil || r.Remaining != 1 {
		t.Errorf("peek a: %+v %v, want 1 left after the peeked request", r, err)
	}
}

// A key whose part of a grouped call fails (here its state is of another
// type) gets Redis's error; the other keys of the call keep their answers.
func TestGroupedCallIsolatesErrors(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	lim, err := algorithms.New(must(New(c)), algorithms.FixedWindow, algorithms.PerMinute(2))
	if err != nil {
		t.Fatal(err)
	}
	l := lim.(*redisLimiter)
	keys := make([]string, 1)
	l.keysOf("broken", keys, 0)
	if err := c.HSet(ctx, keys[0], "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	jobs := []*job{{l: l, key: "a", costs: []int{1}}, {l: l, key: "broken", costs: []int{1}}, {l: l, key: "b", costs: []int{1, 1, 1}}}
	if err := run(ctx, jobs, nil); err != nil {
		t.Fatalf("health %v, want nil: Redis answered", err)
	}
	if jobs[1].err == nil || classify(jobs[1].err) != ErrorScript || !strings.Contains(jobs[1].err.Error(), "WRONGTYPE") {
		t.Errorf("broken key: %v, want Redis's WRONGTYPE as a script error", jobs[1].err)
	}
	if jobs[0].err != nil || !jobs[0].results[0].Allowed || jobs[2].err != nil ||
		!jobs[2].results[0].Allowed || !jobs[2].results[1].Allowed || jobs[2].results[2].Allowed {
		t.Errorf("a: %+v %v; b: %+v %v", jobs[0].results, jobs[0].err, jobs[2].results, jobs[2].err)
	}
}

// clusterSlot computes Redis's slots.
func TestClusterSlot(t *testing.T) {
	for key, want := range map[string]int{"": 0, "foo": 12182, "123456789": 12739} {
		if got := clusterSlot(key); got != want {
			t.Errorf("clusterSlot(%q) = %d, want %d", key, got, want)
		}
	}
}
