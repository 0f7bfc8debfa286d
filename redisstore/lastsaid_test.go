package redisstore

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// When Redis stops answering, the twin starts a key from this instance's
// share of what Redis last said was left: 10 a minute over 2 instances,
// 6 spent through Redis, so 2 (of the 4 left) locally; a key Redis never
// answered for starts from a full share, 5. For every algorithm.
func TestLocalStartsFromRedis(t *testing.T) {
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			srv := redistest.StartServer(t)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
			t.Cleanup(func() { _ = c.Close() })
			l, err := algorithms.New(must(New(c, WithInstances(2), WithTimeout(50*time.Millisecond), WithLogger(quietLogger()))), alg, algorithms.PerMinute(10))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i := range 6 {
				if res, err := l.Allow(ctx, "used", 1); err != nil || !res.Allowed || res.Decider != algorithms.DecidedByStore {
					t.Fatalf("request %d through Redis: %+v %v", i, res, err)
				}
			}
			srv.Stop()
			admitted := func(key string) int {
				n := 0
				for range 8 {
					res, err := l.Allow(ctx, key, 1)
					if err != nil || res.Decider != algorithms.DecidedLocally {
						t.Fatalf("%s: %+v %v; want a local decision", key, res, err)
					}
					if res.Allowed {
						n++
					}
				}
				return n
			}
			if n := admitted("used"); n != 2 {
				t.Errorf("a key Redis said had 4 left: %d admitted locally, want 2 (this instance's share)", n)
			}
			if n := admitted("fresh"); n != 5 {
				t.Errorf("a key Redis never answered for: %d admitted locally, want 5 (a full share)", n)
			}
		})
	}
}

// A limiter of two limits remembers both: 5 per 200 ms and 20 a minute,
// 19 spent through Redis, then Redis stops. Once the short limit's answer
// has stopped mattering (its window is whole again), the minute limit
// still bounds the twin: over the next 1.5 s the key is admitted at most
// L + n - 19 = 2 more, where a twin that forgot the minute limit admits a
// fresh 20 (the buckets: L + n plus what the minute bucket refills
// meanwhile). The algorithms run side by side, each on its own server:
// the test mostly waits for windows to pass.
func TestLocalRemembersEveryLimit(t *testing.T) {
	short := algorithms.Limit{Rate: 5, Period: 200 * time.Millisecond}
	long := algorithms.PerMinute(20)
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartServer(t)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
			t.Cleanup(func() { _ = c.Close() })
			l, err := algorithms.New(must(New(c, WithTimeout(50*time.Millisecond), WithLogger(quietLogger()))), alg, short, long)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			start := time.Now()
			// 4, then three bursts of 5 with the short limit whole again
			// between them: the 19th admission leaves the short limit at
			// 0 and the minute limit at 1, so Redis's last answer is the
			// short limit's.
			spent := 0
			for i, burst := range []int{4, 5, 5, 5} {
				if i > 0 {
					time.Sleep(450 * time.Millisecond)
				}
				for range burst {
					res, err := l.Allow(ctx, "k", 1)
					if err != nil || !res.Allowed || res.Decider != algorithms.DecidedByStore {
						t.Fatalf("request %d through Redis: %+v %v", spent, res, err)
					}
					if spent++; spent == 19 && (res.Index != 0 || res.Remaining != 0) {
						t.Fatalf("the 19th admission: %+v; want the short limit binding, at 0", res)
					}
				}
			}
			srv.Stop()
			time.Sleep(450 * time.Millisecond) // the short limit is whole again, even the counter's
			local := 0
			for range 75 {
				res, err := l.Allow(ctx, "k", 1)
				if err != nil || res.Decider != algorithms.DecidedLocally && res.Decider != algorithms.DecidedByCache {
					t.Fatalf("during the outage: %+v %v", res, err)
				}
				if res.Allowed {
					local++
				}
				time.Sleep(20 * time.Millisecond)
			}
			bound := 20 + 1 - spent
			if alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket {
				bound += int(time.Since(start) / (3 * time.Second)) // the minute bucket refills one per 3 s
			}
			if local > bound {
				t.Errorf("%d admitted locally after %d through Redis: the minute limit was forgotten (at most %d)", local, spent, bound)
			}
		})
	}
}

// A key whose answers the table may have forgotten starts from
// forgottenAllowance, never a fresh share, at four times the table's
// capacity: 4,096 keys each spend their limit of 3 through Redis into a
// table of 1,024 slots, Redis stops, and each key is admitted at most 1
// more locally (L + n with n = 1). A key never answered for is still
// served: its first request passes.
func TestLocalForgetsStrictly(t *testing.T) {
	const slots, keys = 1024, 4096
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindowCounter, algorithms.TokenBucket} {
		t.Run(string(alg), func(t *testing.T) {
			srv := redistest.StartServer(t)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, PoolSize: 8})
			t.Cleanup(func() { _ = c.Close() })
			store := must(New(c, WithTimeout(time.Second), WithLogger(quietLogger()), WithDenialCache(0)))
			store.guard.said = newLastSaid(slots)
			l, err := algorithms.New(store, alg, algorithms.PerMinute(3))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			forEachKeyN(8, keys, func(i int) {
				for r := range 3 {
					res, err := l.Allow(ctx, keyName(i), 1)
					if err != nil || !res.Allowed || res.Decider != algorithms.DecidedByStore {
						t.Errorf("key %d request %d through Redis: %+v %v", i, r, res, err)
					}
				}
			})
			srv.Stop()
			var over atomic.Int64
			forEachKeyN(8, keys, func(i int) {
				n := 0
				for range 3 {
					res, err := l.Allow(ctx, keyName(i), 1)
					if err != nil || res.Decider != algorithms.DecidedLocally {
						t.Errorf("key %d locally: %+v %v", i, res, err)
					}
					if res.Allowed {
						n++
					}
				}
				if n > forgottenAllowance {
					over.Add(1)
				}
			})
			if over.Load() > 0 {
				t.Errorf("%d of %d spent keys admitted more than %d locally: a forgotten key got a fresh share", over.Load(), keys, forgottenAllowance)
			}
			for i := range 100 {
				if res, err := l.Allow(ctx, "new-"+keyName(i), 1); err != nil || !res.Allowed {
					t.Fatalf("a key never answered for: %+v %v; want its first request admitted", res, err)
				}
			}
		})
	}
}

func keyName(i int) string { return "client-" + strconv.Itoa(i) }

// forEachKeyN runs f for keys 0..n-1 on g goroutines and waits for them.
func forEachKeyN(g, n int, f func(i int)) {
	var wg sync.WaitGroup
	var next atomic.Int64
	for range g {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

// owedKeys is how many keys the stores owe Redis charges for.
func owedKeys(stores ...*Store) int {
	owed := 0
	for _, s := range stores {
		b := s.guard.batcher
		b.mu.Lock()
		owed += len(b.owed)
		b.mu.Unlock()
	}
	return owed
}

// Answers can be remembered out of order (a request's owner gets its
// answer, and sends the next, before the flush that answered it has
// remembered it): the answer to the later request stays, whichever comes
// last, for admissions and denials alike.
func TestLastSaidKeepsTheLaterAnswer(t *testing.T) {
	lim := algorithms.PerHour(9)
	l := &redisLimiter{alg: algorithms.FixedWindow, limits: []algorithms.Limit{lim}, instances: 1,
		saidSpan: saidSpanOf(algorithms.FixedWindow, []algorithms.Limit{lim})}
	t0 := time.Unix(1_800_000_000, 0)
	pass := func(remaining int) algorithms.Result {
		return algorithms.Result{Allowed: true, Remaining: remaining, ResetAfter: time.Hour}
	}
	deny := algorithms.Result{RetryAfter: time.Hour, ResetAfter: time.Hour}
	for _, c := range []struct {
		name          string
		first, second algorithms.Result
		at1, at2      time.Duration // when each request was sent, after t0
		want          int64
	}{
		{"admissions in order", pass(5), pass(0), 1, 2, 0},
		{"admissions out of order", pass(0), pass(5), 2, 1, 0},
		{"a denial, then an earlier admission", deny, pass(5), 2, 1, 0},
		{"an admission, then an earlier denial", pass(3), deny, 2, 1, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newLastSaid(16)
			s.remember(l, "k", t0.Add(c.at1*time.Millisecond), c.first)
			s.remember(l, "k", t0.Add(c.at2*time.Millisecond), c.second)
			room, kind := s.take(l, "k", t0.Add(time.Second))
			if kind != startFromRoom || room != c.want {
				t.Errorf("starts from %d (%v); want %d", room, kind, c.want)
			}
		})
	}
}
