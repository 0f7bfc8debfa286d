package config

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
)

// Two instances built from one file share each route's limit in Redis;
// a reload that changes a store setting makes a new client, and the counts,
// which live in Redis, survive it.
func TestServeRedis(t *testing.T) {
	addr := redistest.Standalone(t)
	t.Setenv("REDLIMIT_TEST_REDIS", "redis://"+addr+"/3")
	file := "redis:\n  url_env: REDLIMIT_TEST_REDIS\n  prefix: cfgtest\n  pool_size: 4\n  dial_timeout: 1s\n  timeout: 200ms\n" + served
	rt1, h1 := mount(t, file, buildOpts(quiet())...)
	_, h2 := mount(t, file, buildOpts(quiet())...)
	if got, want := rt1.Store(), "Redis at "+addr+" db 3"; got != want {
		t.Fatalf("Store() %q, want %q", got, want)
	}
	const a = "192.0.2.1:1"
	var got []int
	for i := range 4 {
		h := h1
		if i%2 == 1 {
			h = h2
		}
		got = append(got, send(h, "GET", "/items", a).Code)
	}
	if !equal(got, ints(200, 200, 200, 429)) {
		t.Fatalf("two instances: %v, want one shared limit of 3", got)
	}
	if got := codes(h1, 3, "GET", "/reports", a, "X-API-Key", "free-key"); !equal(got, ints(200, 200, 429)) {
		t.Fatalf("reports: %v", got)
	}

	// State is in db 3 under the prefix, and no raw API key is anywhere.
	rdb := redis.NewClient(&redis.Options{Addr: addr, DB: 3})
	defer rdb.Close()
	keys, err := rdb.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("no keys in Redis db 3")
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "cfgtest:{") || strings.Contains(k, "free-key") {
			t.Errorf("key %q", k)
		}
	}

	// A new store setting: a new client on the same server and prefix;
	// the counts are still there.
	if err := reload(t, rt1, edit(t, file, "timeout: 200ms", "timeout: 300ms")); err != nil {
		t.Fatal(err)
	}
	if got := codes(h1, 1, "GET", "/items", a); !equal(got, ints(429)) {
		t.Fatalf("after a reload with a new client: %v, want the count kept in Redis", got)
	}
	// Moving to the memory store starts afresh, in this process only.
	t.Setenv("REDLIMIT_TEST_REDIS", "")
	if err := reload(t, rt1, file); err != nil {
		t.Fatal(err)
	}
	if rt1.Store() != "memory (this process only)" {
		t.Fatalf("with url_env empty: %s", rt1.Store())
	}
	if got := codes(h1, 1, "GET", "/items", a); !equal(got, ints(200)) {
		t.Fatalf("memory store after Redis: %v", got)
	}
}

// On Redis too, requests across back-to-back reloads all get 200 or 429,
// and each client exactly its limit.
func TestReloadUnderLoadRedis(t *testing.T) {
	addr := redistest.Standalone(t)
	// A generous deadline: a loaded machine must not hand decisions to the
	// local twin, whose count is its own.
	file := "redis: {url: \"redis://" + addr + "/0\", timeout: 1s}\n" + served
	rt, h := mount(t, file, buildOpts(quiet())...)
	other := edit(t, file, "rate: 20, period: 1m, burst: 10", "rate: 30, period: 1m, burst: 10")
	const clients, perClient = 300, 5
	stop := make(chan struct{})
	reloads := make(chan int, 1)
	go func() {
		n := 0
		defer func() { reloads <- n }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			f := file
			if i%2 == 0 {
				f = other
			}
			c, err := Parse([]byte(f), "served.yaml")
			if err == nil {
				err = rt.Reload(c)
			}
			if err != nil {
				t.Error(err)
				return
			}
			n++
		}
	}()
	var wg sync.WaitGroup
	passed := make([]atomic.Int64, clients)
	var bad atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < clients*perClient; i += 8 {
				c := i % clients
				switch send(h, "GET", "/items", fmt.Sprintf("192.0.%d.%d:1", 2+c/250, 1+c%250)).Code {
				case 200:
					passed[c].Add(1)
				case 429:
				default:
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	n := <-reloads
	if bad.Load() != 0 {
		t.Fatalf("%d requests got neither 200 nor 429", bad.Load())
	}
	for c := range passed {
		if got := passed[c].Load(); got != 3 {
			t.Fatalf("client %d: %d passed, want 3", c, got)
		}
	}
	if n < 5 {
		t.Fatalf("only %d reloads during the requests", n)
	}
	t.Logf("%d requests, %d reloads", clients*perClient, n)
}

// redis.timeout is the decision's deadline, not cut short by the
// middleware's default of 100 ms: with Redis frozen, a request waits
// the configured 400 ms, then the store decides locally.
func TestRedisTimeoutApplies(t *testing.T) {
	srv := redistest.StartServer(t)
	file := "redis: {url: \"redis://" + srv.Addr + "/0\", timeout: 400ms}\n" + served
	_, h := mount(t, file, buildOpts(quiet())...)
	if got := send(h, "GET", "/items", "192.0.2.1:1").Code; got != 200 {
		t.Fatalf("first request: %d", got)
	}
	srv.Freeze()
	defer srv.Thaw()
	start := time.Now()
	rec := send(h, "GET", "/items", "192.0.2.2:1")
	took := time.Since(start)
	if rec.Code != 200 || rec.Header().Get("X-RateLimit-Limit") != "3" {
		t.Fatalf("with Redis frozen: %d %v, want a local decision", rec.Code, rec.Header())
	}
	if took < 380*time.Millisecond || took > 2*time.Second {
		t.Fatalf("decided in %s, want the configured 400 ms", took)
	}
}
