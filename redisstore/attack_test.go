package redisstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// A hung Redis (the process stopped) holds no decision past its deadline,
// whether the call is sent on the caller's goroutine (a client that honours
// a context's deadline) or by a flusher (a default client): each request
// is decided by the failure mode within the store's timeout, or the
// context's deadline when sooner, and decisions come back to Redis once it
// runs again.
func TestAttackHungRedisHoldsNoRequest(t *testing.T) {
	const timeout = 60 * time.Millisecond
	for _, tc := range []struct {
		name   string
		opts   redis.Options
		inline bool
		warm   bool // a pooled connection exists before the freeze
	}{
		{name: "inline warm", opts: redis.Options{ContextTimeoutEnabled: true}, inline: true, warm: true},
		{name: "inline cold", opts: redis.Options{ContextTimeoutEnabled: true, PoolSize: 2}, inline: true},
		{name: "default warm", opts: redis.Options{}, warm: true},
		{name: "default cold", opts: redis.Options{PoolSize: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			opts := tc.opts
			opts.Addr = srv.Addr
			c := redis.NewClient(&opts)
			defer c.Close()
			store := must(New(c, WithTimeout(timeout), WithDenialCache(0),
				WithBreaker(BreakerPolicy{Failures: 1 << 30, MinCalls: 1 << 30})))
			if got := store.guard.inline; got != tc.inline {
				t.Fatalf("inline %v, want %v", got, tc.inline)
			}
			l, err := algorithms.New(store, algorithms.TokenBucket, algorithms.PerSecond(1000))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tc.warm {
				if res, err := l.Allow(ctx, "warm", 1); err != nil || res.Decider != algorithms.DecidedByStore {
					t.Fatalf("warm-up: %+v %v", res, err)
				}
			}
			srv.Freeze()
			defer srv.Thaw()
			var wg sync.WaitGroup
			var mu sync.Mutex
			var worst time.Duration
			for i := range 16 {
				wg.Go(func() {
					rctx := ctx
					bound := timeout
					if i%2 == 1 { // a caller deadline sooner than the store's
						bound = 20 * time.Millisecond
						var cancel context.CancelFunc
						rctx, cancel = context.WithTimeout(ctx, bound)
						defer cancel()
					}
					began := time.Now()
					res, err := l.Allow(rctx, fmt.Sprintf("k%d", i%4), 1)
					took := time.Since(began)
					if err != nil || res.Decider != algorithms.DecidedLocally {
						t.Errorf("frozen Redis: %+v %v, want a local decision", res, err)
					}
					mu.Lock()
					worst = max(worst, took-bound)
					mu.Unlock()
				})
			}
			wg.Wait()
			// Slack for a loaded machine under the race detector.
			if worst > 40*time.Millisecond {
				t.Errorf("a request was held %s past its deadline", worst)
			}
			srv.Thaw()
			deadline := time.Now().Add(5 * time.Second)
			for {
				res, err := l.Allow(ctx, "after", 1)
				if err == nil && res.Decider == algorithms.DecidedByStore {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after thaw: %+v %v, want Redis deciding again", res, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// A store whose clock is not the wall clock (WithClock, as tests do) still
// decides in Redis through a client that bounds commands by their
// context's deadline, and a hung Redis holds none of its decisions past
// the store's timeout: the deadline such a client is handed is on the
// clock the wheel keeps, not the store's.
func TestAttackStoreClockIsNotTheConnectionDeadline(t *testing.T) {
	const timeout = 100 * time.Millisecond
	for _, tc := range []struct {
		name  string
		clock func() time.Time
	}{
		{name: "past", clock: func() time.Time { return time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{name: "future", clock: func() time.Time { return time.Now().Add(48 * time.Hour) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
			defer c.Close()
			l, err := algorithms.New(must(New(c, WithClock(tc.clock), WithTimeout(timeout), WithDenialCache(0))), algorithms.FixedWindow, algorithms.PerMinute(5))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				// Half with a caller's deadline, later than the store's.
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%2)*time.Second)
				if i%2 == 0 {
					ctx = context.Background()
				}
				began := time.Now()
				res, err := l.Allow(ctx, "k", 1)
				took := time.Since(began)
				cancel()
				if err != nil || res.Decider != algorithms.DecidedByStore || !res.Allowed {
					t.Fatalf("request %d: %+v %v after %s, want Redis's pass", i, res, err, took)
				}
			}
			srv.Freeze()
			defer srv.Thaw()
			began := time.Now()
			res, err := l.Allow(context.Background(), "k", 1)
			if took := time.Since(began); took > timeout+50*time.Millisecond {
				t.Errorf("frozen Redis held the request %s, the store's timeout is %s", took, timeout)
			}
			if err != nil || res.Decider != algorithms.DecidedLocally {
				t.Errorf("frozen Redis: %+v %v, want a local decision", res, err)
			}
		})
	}
}

// On Cluster, keys decided together land in calls of one slot each, keys
// with braces and percent signs included: no call is refused as CROSSSLOT,
// and every key gets exactly its limit, however many keys share a flush.
func TestAttackClusterGroupedCallsKeepSlots(t *testing.T) {
	addrs := redistest.Cluster(t)
	// Keys of one slot, with and without braces, so that flushes group them.
	var keys []string
	slot := clusterSlot(hashTagSafe("{a}"))
	for i := 0; len(keys) < 24; i++ {
		for _, k := range []string{fmt.Sprintf("u%d", i), fmt.Sprintf("{%d}", i), fmt.Sprintf("x}%d{", i)} {
			if clusterSlot(hashTagSafe(k)) == slot {
				keys = append(keys, k)
			}
		}
	}
	keys = append(keys, "{a}", "a", "%7Ba%7D", "}{", "{", "}", "%", "foo", "123456789")
	for _, inline := range []bool{false, true} {
		t.Run(fmt.Sprintf("inline=%v", inline), func(t *testing.T) {
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: inline})
			defer c.Close()
			trips := &tripCounter{pipelineCmds: map[string]int{}}
			c.AddHook(trips)
			l, err := algorithms.New(must(New(c, WithPrefix(fmt.Sprintf("cs%v", inline)), WithTimeout(2*time.Second),
				WithDenialCache(0), WithMaxInFlight(1), WithFailureMode(FailClosed))), algorithms.SlidingWindowCounter, algorithms.PerMinute(3))
			if err != nil {
				t.Fatal(err)
			}
			const per = 5
			allowed := make([]int, len(keys))
			var mu sync.Mutex
			var wg sync.WaitGroup
			for n, k := range keys {
				for range per {
					wg.Go(func() {
						res, err := l.Allow(context.Background(), k, 1)
						if err != nil || (res.Decider != algorithms.DecidedByStore && res.Decider != algorithms.DecidedByCache) {
							t.Errorf("key %q: %+v %v, want Redis's answer", k, res, err)
							return
						}
						if res.Allowed {
							mu.Lock()
							allowed[n]++
							mu.Unlock()
						}
					})
				}
			}
			wg.Wait()
			for n, k := range keys {
				if allowed[n] != 3 {
					t.Errorf("key %q: %d allowed, want 3", k, allowed[n])
				}
			}
			if trips.largestCall <= 2 {
				t.Errorf("largest call had %d keys: no keys were grouped, the test proves nothing", trips.largestCall)
			}
		})
	}
}

// A grouped call in which one key consumed and another's group failed is
// kept whole: sent again (a lost reply), it returns the first run's answer
// for both, the failed key's error included, and counts nothing twice.
func TestAttackResentGroupedCallWithFailedGroup(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	lim, err := algorithms.New(must(New(c, WithPrefix("resent"), WithDenialCache(0))), algorithms.FixedWindow, algorithms.PerMinute(5))
	if err != nil {
		t.Fatal(err)
	}
	l := lim.(*redisLimiter)
	if !l.once {
		t.Fatal("a default client resends: calls must carry an id")
	}
	broken := make([]string, 1)
	l.keysOf("broken", broken, 0)
	if err := c.HSet(ctx, broken[0], "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	jobs := []*job{{l: l, key: "a", costs: []int{1, 1}}, {l: l, key: "broken", costs: []int{1}}, {l: l, key: "b", costs: []int{2}}}
	calls := callsOf(jobs)
	if len(calls) != 1 {
		t.Fatalf("%d calls, want the three keys in one", len(calls))
	}
	first := calls[0]
	if err := runCalls(ctx, c, calls); err != nil {
		t.Fatal(err)
	}
	firstReply, _ := first.cmd.Text()
	// The same call again, as go-redis sends it after a lost reply.
	again := first.script.Run(ctx, c, first.keys, first.args...)
	if got, err := again.Text(); err != nil || got != firstReply {
		t.Errorf("resent call: %q %v, want the first reply %q", got, err, firstReply)
	}
	for key, want := range map[string]int{"a": 2, "b": 2} {
		if got := used(t, l, key); got != want {
			t.Errorf("key %q used %d, want %d: counted once", key, got, want)
		}
	}
	if jobs[1].err == nil || classify(jobs[1].err) != ErrorScript {
		t.Errorf("broken key: %v, want a script error", jobs[1].err)
	}
}

// A caller that flushes its key inline is held by its own deadline only:
// a request of the same key that arrived between the caller's submit and
// its flush (here placed there by hand), with a later deadline, is not
// sent in the caller's call, whose bound would then be that later
// deadline. With Redis hung, the caller returns by its deadline and the
// later request is still decided, by its own.
func TestAttackInlineFlushKeepsCallersDeadline(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer c.Close()
	store := must(New(c, WithTimeout(300*time.Millisecond), WithDenialCache(0)))
	lim, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(100))
	if err != nil {
		t.Fatal(err)
	}
	l := lim.(*redisLimiter)
	ctx := context.Background()
	if _, err := l.Allow(ctx, "k", 1); err != nil { // a pooled connection
		t.Fatal(err)
	}
	g := l.guard
	srv.Freeze()
	defer srv.Thaw()

	now := g.clock()
	mine := newWaiter(1, now.Add(20*time.Millisecond), false)
	start, ok := g.batcher.submit(l, "k", mine)
	if !ok || start == nil {
		t.Fatal("the first request of an idle key should flush it")
	}
	later := newWaiter(1, now.Add(300*time.Millisecond), false)
	if q, ok := g.batcher.submit(l, "k", later); !ok || q != nil {
		t.Fatal("the second request should wait for the key's flush")
	}
	began := time.Now()
	g.batcher.flushInline(start)
	if took := time.Since(began); took > 20*time.Millisecond+40*time.Millisecond {
		t.Errorf("the inline flush held its caller %s; its deadline was 20ms", took)
	}
	// The later request is sent by a flusher and answered by its deadline.
	select {
	case <-later.done:
	case <-time.After(time.Second):
		if later.state.Load() == waiterQueued {
			t.Error("the later request was never sent")
		}
	}
}

// A request admitted locally before its turn in Redis is charged there,
// even one whose deadline was too close for a round trip when its flusher
// took it from the line (it was dropped, and Redis never counted it).
func TestAttackCloseDeadlineChargeIsLost(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer c.Close()
	l, err := algorithms.New(must(New(c, WithPrefix("charge"), WithDenialCache(0))), algorithms.FixedWindow, algorithms.PerMinute(100))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Allow(ctx, "warm", 1); err != nil {
		t.Fatal(err)
	}
	local := 0
	for range 5 {
		rctx, cancel := context.WithTimeout(ctx, 500*time.Microsecond)
		res, err := l.Allow(rctx, "k", 1)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed && res.Decider == algorithms.DecidedLocally {
			local++
		}
	}
	time.Sleep(100 * time.Millisecond) // any charge's call has ended
	if got := used(t, l, "k"); got != local {
		t.Errorf("%d requests admitted locally, Redis counts %d", local, got)
	}
}
