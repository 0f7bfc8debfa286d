package config

import (
	"context"
	"strings"
	"testing"

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
