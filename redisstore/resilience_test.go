package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/breaker"
	"github.com/redlimit/redlimit/internal/redistest"
)

// One script call deciding several requests for one key gives each the
// answer it would have got alone, in order, at the same instant.
func TestBatchEqualsOneByOne(t *testing.T) {
	m := miniredis.RunT(t)
	m.SetTime(start)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer c.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 7))
	for _, alg := range algorithms.All() {
		limits := []algorithms.Limit{{Rate: 7, Period: time.Second, Burst: 9}, {Rate: 20, Period: time.Minute, Burst: 12}}
		one, err := algorithms.New(must(New(c, WithPrefix("one"), WithDenialCache(0))), alg, limits...)
		if err != nil {
			t.Fatal(err)
		}
		batched, err := algorithms.New(must(New(c, WithPrefix("batch"), WithDenialCache(0))), alg, limits...)
		if err != nil {
			t.Fatal(err)
		}
		for round := range 3 {
			m.SetTime(start.Add(time.Duration(round) * 400 * time.Millisecond))
			costs := make([]int, 1+rng.IntN(12))
			for i := range costs {
				costs[i] = 1 + rng.IntN(4)
			}
			j := &job{l: batched.(*redisLimiter), key: "k", costs: costs}
			_ = j.l.callAlone(ctx, j, true)
			got, err := j.results, j.err
			if err != nil {
				t.Fatal(err)
			}
			for i, cost := range costs {
				want, err := one.Allow(ctx, "k", cost)
				if err != nil {
					t.Fatal(err)
				}
				if got[i] != want {
					t.Fatalf("%s round %d request %d (cost %d of %v): batch %+v, alone %+v", alg, round, i, cost, costs, got[i], want)
				}
			}
		}
	}
}

// A flood on one key from 4 instances holds the limit exactly, is decided
// by Redis and the denial cache alone (never locally), and costs Redis far
// less than one call per request.
func TestOneKeyFlood(t *testing.T) {
	addr := redistest.Standalone(t)
	const instances, perInstance, limit = 4, 1250, 10
	counter := &commandCounter{}
	limiters := make([]algorithms.Limiter, instances)
	for i := range limiters {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
		c.AddHook(counter)
		t.Cleanup(func() { c.Close() })
		if err := c.Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		l, err := algorithms.New(must(New(c, WithTimeout(time.Second))), algorithms.SlidingWindowCounter, algorithms.PerMinute(limit))
		if err != nil {
			t.Fatal(err)
		}
		limiters[i] = l
	}
	counter.take()
	var mu sync.Mutex
	by := map[algorithms.Decider]int{}
	allowed := 0
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range instances * perInstance {
		wg.Go(func() {
			<-start
			r, err := limiters[i%instances].Allow(context.Background(), "flood", 1)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			by[r.Decider]++
			if r.Allowed {
				allowed++
			}
		})
	}
	close(start)
	wg.Wait()
	calls := len(counter.take())
	t.Logf("%d requests: %d allowed, decided by %v; %d script calls", instances*perInstance, allowed, by, calls)
	if allowed != limit {
		t.Errorf("%d allowed, want %d", allowed, limit)
	}
	if by[algorithms.DecidedLocally]+by[algorithms.DecidedFailOpen]+by[algorithms.DecidedFailClosed] != 0 {
		t.Errorf("decided by %v, want Redis and the cache only", by)
	}
	// Each instance needs a call per round trip while the first requests
	// queue, and the cache answers the rest.
	if denied := instances*perInstance - limit; float64(calls) > 0.01*float64(denied) {
		t.Errorf("%d script calls for %d denied requests, want under 0.01 per denial", calls, denied)
	}
}

// The denial cache never denies what Redis would admit: waiting out the
// RetryAfter it gave is enough, and a cheaper request is asked of Redis.
func TestDenialCacheNeverDeniesWhatRedisAdmits(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	l, err := algorithms.New(must(New(c)), algorithms.TokenBucket, algorithms.Limit{Rate: 4, Period: time.Second, Burst: 4})
	if err != nil {
		t.Fatal(err)
	}
	mustAllow := func(cost int, want bool, by algorithms.Decider) algorithms.Result {
		t.Helper()
		r, err := l.Allow(ctx, "k", cost)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed != want || r.Decider != by {
			t.Fatalf("cost %d: allowed %v by %s, want %v by %s", cost, r.Allowed, r.Decider, want, by)
		}
		return r
	}
	mustAllow(3, true, algorithms.DecidedByStore)
	denial := mustAllow(3, false, algorithms.DecidedByStore)
	cached := mustAllow(3, false, algorithms.DecidedByCache)
	if cached.RetryAfter > denial.RetryAfter || cached.RetryAfter <= 0 {
		t.Fatalf("cached RetryAfter %s, want in (0, %s]", cached.RetryAfter, denial.RetryAfter)
	}
	mustAllow(4, false, algorithms.DecidedByCache) // more than was denied: denied too
	mustAllow(1, true, algorithms.DecidedByStore)  // less: Redis decides, and admits it
	// The cached denial lasts until its own RetryAfter, then Redis decides
	// again; its RetryAfter, waited out, admits the request.
	time.Sleep(mustAllow(3, false, algorithms.DecidedByCache).RetryAfter)
	time.Sleep(mustAllow(3, false, algorithms.DecidedByStore).RetryAfter)
	mustAllow(3, true, algorithms.DecidedByStore)
}

// Under maxmemory with noeviction, a new key's writes fail: that key is
// decided locally, one such error does not stop the store asking Redis, and
// an exhausted client stays denied, by Redis itself, which can still read.
func TestOutOfMemory(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer c.Close()
	ctx := context.Background()
	store := must(New(c, WithDenialCache(0)))
	l, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(10))
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if r, err := l.Allow(ctx, "exhausted", 1); err != nil || !r.Allowed {
			t.Fatalf("filling the quota: %+v %v", r, err)
		}
	}
	if err := c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	r, err := l.Allow(ctx, "new identity", 1)
	if err != nil || !r.Allowed || r.Decider != algorithms.DecidedLocally {
		t.Fatalf("a new key under OOM: %+v %v, want allowed locally", r, err)
	}
	if st := store.guard.breaker.State(); st != breaker.Closed {
		t.Fatalf("breaker %s after one error, want closed", st)
	}
	for range 100 {
		r, err := l.Allow(ctx, "exhausted", 1)
		if err != nil || r.Allowed || r.Decider != algorithms.DecidedByStore {
			t.Fatalf("the exhausted client under OOM: %+v %v, want denied by Redis", r, err)
		}
	}
}

// Decisions that wait in this process past their deadline, Redis being
// slow, are decided locally at once when too many already wait, and only
// calls actually sent count against Redis's health.
func TestSaturationIsNotARedisFailure(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true, PoolSize: 4})
	defer c.Close()
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	ctx := context.Background()
	store := must(New(c, WithMaxInFlight(1), WithMaxWaiting(3), WithBreaker(BreakerPolicy{Failures: 2})))
	l, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Allow(ctx, "warm", 1); err != nil { // dial before the pause
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "400", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]algorithms.Result, 20)
	took := make([]time.Duration, 20)
	for i := range results {
		wg.Go(func() {
			began := time.Now()
			r, err := l.Allow(ctx, fmt.Sprintf("key%d", i), 1)
			if err != nil {
				t.Error(err)
			}
			results[i], took[i] = r, time.Since(began)
		})
	}
	wg.Wait()
	for i, r := range results {
		if !r.Allowed || r.Decider != algorithms.DecidedLocally || took[i] > DefaultTimeout+50*time.Millisecond {
			t.Errorf("request %d: %+v after %s, want allowed locally within the deadline", i, r, took[i])
		}
	}
	// One call was in flight and timed out: one failure, under the two
	// that open the breaker; the other 19 never reached Redis.
	if st := store.guard.breaker.State(); st != breaker.Closed {
		t.Fatalf("breaker %s, want closed: waiting in this process is not Redis failing", st)
	}
	time.Sleep(400 * time.Millisecond) // the pause ends
	if r, err := l.Allow(ctx, "after", 1); err != nil || r.Decider != algorithms.DecidedByStore {
		t.Fatalf("after the pause: %+v %v, want decided by Redis", r, err)
	}
}

// Options the Redis store cannot use are reported by New.
func TestRedisOptionsRefused(t *testing.T) {
	c := redisClientNeverUsed()
	for _, opt := range []Option{
		WithTimeout(0), WithFailureMode(FailureMode(9)), WithInstances(0), WithBreaker(BreakerPolicy{Ratio: 2}),
		WithBreaker(BreakerPolicy{MaxOpenFor: -time.Second}), WithBreaker(BreakerPolicy{MaxOpenFor: 100 * time.Millisecond}),
		WithBreaker(BreakerPolicy{OpenFor: 2 * time.Second, MaxOpenFor: time.Second}),
		WithMaxInFlight(0), WithMaxWaiting(0), WithDenialCache(-1), WithLogger(nil),
	} {
		if st, err := New(c, opt); !errors.Is(err, algorithms.ErrInvalidOption) || st != nil {
			t.Errorf("option accepted: %v, %v", st, err)
		}
	}
}
