package faults

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// exhaust spends key's quota of rate in Redis, and one more request, so
// that Redis has denied it.
func exhaust(t *testing.T, l algorithms.Limiter, key string, rate int) {
	t.Helper()
	for i := range rate + 1 {
		res, err := l.Allow(context.Background(), key, 1)
		if err != nil || res.Decider != algorithms.DecidedByStore || res.Allowed != (i < rate) {
			t.Fatalf("spending %s's quota, request %d: %+v %v", key, i, res, err)
		}
	}
}

// A pause of Redis (a blip): an exhausted client gets nothing through,
// during it or after; a new one gets at most its local quota while Redis is
// paused; decisions are Redis's again within a second.
func TestClientPause(t *testing.T) {
	const rate = 10
	for _, k := range clientKinds {
		t.Run(k.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			admin := newClient(t, clientKinds[1], srv.Addr)
			l := newLimiter(t, newClient(t, k, srv.Addr), rate)
			exhaust(t, l, "exhausted", rate)

			ds, ended := runLoad(l, []string{"exhausted", "fresh"}, 4, 1200*time.Millisecond, func() {
				time.Sleep(50 * time.Millisecond)
				if err := admin.Do(context.Background(), "CLIENT", "PAUSE", "300", "ALL").Err(); err != nil {
					t.Error(err)
				}
				time.Sleep(300 * time.Millisecond)
			})
			s := summarize(ds, ended)
			s.checkCommon(t)
			if n := s.allowedBy("exhausted", algorithms.DecidedByStore, algorithms.DecidedByCache, algorithms.DecidedLocally); n != 0 {
				t.Errorf("the exhausted client got %d requests through", n)
			}
			if n := s.allowedBy("fresh", algorithms.DecidedByStore); n > rate {
				t.Errorf("Redis admitted %d for a fresh client, limit %d", n, rate)
			}
			if n := s.allowedBy("fresh", algorithms.DecidedLocally); n > rate {
				t.Errorf("%d admitted locally for a fresh client, local quota %d", n, rate)
			}
			s.checkBackWithin(t, ended, time.Second)
		})
	}
}

// SCRIPT FLUSH drops the scripts: they are loaded again, and the counts go
// on exactly, all decided by Redis.
func TestScriptFlush(t *testing.T) {
	const rate = 10
	for _, k := range clientKinds {
		t.Run(k.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			admin := newClient(t, clientKinds[1], srv.Addr)
			l := newLimiter(t, newClient(t, k, srv.Addr), rate)
			ctx := context.Background()
			for range 5 {
				if res, err := l.Allow(ctx, "k", 1); err != nil || !res.Allowed {
					t.Fatalf("before the flush: %+v %v", res, err)
				}
			}
			if err := admin.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			allowed := 0
			for i := range 10 {
				res, err := l.Allow(ctx, "k", 1)
				// Redis decides, or its cached denial does.
				if err != nil || (res.Decider != algorithms.DecidedByStore && res.Decider != algorithms.DecidedByCache) {
					t.Fatalf("after the flush, request %d: %+v %v", i, res, err)
				}
				if res.Allowed {
					allowed++
				}
			}
			if allowed != 5 {
				t.Errorf("after the flush %d admitted, want the 5 left", allowed)
			}
		})
	}
}

// maxmemory with noeviction: every new identity's write fails with OOM.
// That is no outage: the breaker stays closed, an exhausted client stays
// denied, and new identities get at most the local quota.
func TestOutOfMemory(t *testing.T) {
	const rate = 5
	for _, k := range clientKinds {
		for _, cache := range []int{redisstore.DefaultDenialCacheSize, 0} {
			t.Run(fmt.Sprintf("%s, denial cache %d", k.name, cache), func(t *testing.T) {
				testOutOfMemory(t, k, rate, redisstore.WithDenialCache(cache))
			})
		}
	}
}

// testOutOfMemory is TestOutOfMemory with one client and store options.
func testOutOfMemory(t *testing.T, k clientKind, rate int, opts ...redisstore.Option) {
	srv := redistest.StartServer(t)
	admin := newClient(t, clientKinds[1], srv.Addr)
	l := newLimiter(t, newClient(t, k, srv.Addr), rate, opts...)
	exhaust(t, l, "exhausted", rate)
	ctx := context.Background()
	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1"}} {
		if err := admin.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	keys := []string{"exhausted"}
	for i := range 20 {
		keys = append(keys, "new-"+strconv.Itoa(i))
	}
	ds, ended := runLoad(l, keys, 4, 0, func() { time.Sleep(700 * time.Millisecond) })
	s := summarize(ds, ended)
	s.checkCommon(t)
	if n := s.allowedBy("exhausted", algorithms.DecidedByStore, algorithms.DecidedByCache, algorithms.DecidedLocally); n != 0 {
		t.Errorf("the exhausted client got %d requests through under OOM", n)
	}
	for _, key := range keys[1:] {
		if n := s.allowedBy(key, algorithms.DecidedLocally, algorithms.DecidedByStore); n > rate {
			t.Errorf("%s: %d admitted under OOM, local quota %d", key, n, rate)
		}
	}
	// Redis is healthy, only full: the exhausted client's denials
	// keep coming from it, none from the twin.
	for _, d := range ds {
		if d.key == "exhausted" && d.by == algorithms.DecidedLocally {
			t.Fatalf("the exhausted client was decided locally at %s: the breaker opened on OOM errors", d.at.Sub(ds[0].at))
		}
	}
}

// blackhole listens on a loopback port, accepts connections and never
// answers, until the test ends.
func blackhole(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = ln.Close()
		close(done)
		conns.Wait()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() {
				<-done
				_ = c.Close()
			})
		}
	}()
	return ln.Addr().String()
}

// A server that accepts connections and never answers, with clients whose
// own timeouts are seconds: every decision within the deadline, made
// locally within the local quota.
func TestBlackhole(t *testing.T) {
	const rate = 10
	for _, k := range clientKinds {
		t.Run(k.name, func(t *testing.T) {
			l := newLimiter(t, newClient(t, k, blackhole(t)), rate)
			ds, ended := runLoad(l, []string{"a", "b", "c"}, 4, 0, func() { time.Sleep(time.Second) })
			s := summarize(ds, ended)
			s.checkCommon(t)
			for _, key := range []string{"a", "b", "c"} {
				if n := s.allowedBy(key, algorithms.DecidedLocally); n > rate {
					t.Errorf("%s: %d admitted, local quota %d", key, n, rate)
				}
				if n := s.allowedBy(key, algorithms.DecidedByStore, algorithms.DecidedByCache, algorithms.DecidedFailOpen); n != 0 {
					t.Errorf("%s: %d admitted by no local decision", key, n)
				}
			}
		})
	}
}
