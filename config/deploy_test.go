package config

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memstore"
)

// sharesLimits checks that two instances built from one file share each
// client's limit of 3 on /items, for clients enough to land on every node
// of a cluster.
func sharesLimits(t *testing.T, h1, h2 http.Handler) {
	t.Helper()
	for c := range 8 {
		addr := fmt.Sprintf("192.0.2.%d:1", c+1)
		var got []int
		for i := range 4 {
			h := h1
			if i%2 == 1 {
				h = h2
			}
			got = append(got, send(h, "GET", "/items", addr).Code)
		}
		if !equal(got, ints(200, 200, 200, 429)) {
			t.Fatalf("client %s across two instances: %v, want one shared limit of 3", addr, got)
		}
	}
}

// countKeys returns how many keys under prefix rdb holds (on every master
// of a cluster).
func countKeys(t *testing.T, rdb redis.UniversalClient, prefix string) int {
	t.Helper()
	ctx := context.Background()
	var n atomic.Int64 // ForEachMaster runs on every master at once
	count := func(ctx context.Context, c *redis.Client) error {
		keys, err := c.Keys(ctx, prefix+":*").Result()
		n.Add(int64(len(keys)))
		return err
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, count)
	} else {
		err = count(ctx, rdb.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
	return int(n.Load())
}

// A file that names Sentinels reaches the master they watch, with the
// master's password from the environment.
func TestServeSentinel(t *testing.T) {
	ss := redistest.StartSentinel(t)
	// The Sentinels and the replica keep talking to the master once it
	// requires the password, so none fails it over.
	for _, addr := range ss.Addrs {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
		err := sc.Set(context.Background(), ss.MasterName, "auth-pass", "sentinel-test-pw").Err()
		_ = sc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ss.Replica.Do("CONFIG", "SET", "masterauth", "sentinel-test-pw"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RL_TEST_MASTER_PW", "sentinel-test-pw")
	file := fmt.Sprintf("redis:\n  sentinel:\n    master_name: %s\n    addrs: [%s]\n  password_env: RL_TEST_MASTER_PW\n  prefix: sent\n  timeout: 1s\n",
		ss.MasterName, strings.Join(ss.Addrs, ", ")) + served
	// The master requires the password from here on, so a client without
	// it would write nothing.
	if _, err := ss.Master.Do("CONFIG", "SET", "requirepass", "sentinel-test-pw"); err != nil {
		t.Fatal(err)
	}
	rt, h1 := mount(t, file, buildOpts(quiet())...)
	_, h2 := mount(t, file, buildOpts(quiet())...)
	if got, want := rt.Store(), "Redis Sentinel master "+ss.MasterName+" via "+strings.Join(ss.Addrs, ", ")+" db 0"; got != want {
		t.Fatalf("Store() %q, want %q", got, want)
	}
	sharesLimits(t, h1, h2)
	master := redis.NewClient(&redis.Options{Addr: ss.Master.Addr, Password: "sentinel-test-pw"})
	defer master.Close()
	if n := countKeys(t, master, "sent"); n == 0 {
		t.Fatal("no keys on the master")
	}
}

// A file that names a Cluster's nodes spreads the keys over its masters
// and shares the limits.
func TestServeCluster(t *testing.T) {
	addrs := redistest.Cluster(t)
	file := fmt.Sprintf("redis:\n  cluster: {addrs: [%s]}\n  prefix: clu\n  timeout: 1s\n", addrs[0]) + served
	rt, h1 := mount(t, file, buildOpts(quiet())...)
	_, h2 := mount(t, file, buildOpts(quiet())...)
	if got, want := rt.Store(), "Redis Cluster via "+addrs[0]; got != want {
		t.Fatalf("Store() %q, want %q", got, want)
	}
	sharesLimits(t, h1, h2)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer cc.Close()
	if n := countKeys(t, cc, "clu"); n < 8 {
		t.Fatalf("%d keys in the cluster, want one per client at least", n)
	}
}

// The password comes from the variable password_env names: with it the
// store writes its counts; with a wrong one it writes nothing, and the
// requests are refused as the failure mode says.
func TestServeRedisPasswordFromEnv(t *testing.T) {
	srv := redistest.StartServer(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "limiter", "on", ">env-test-pw", "~*", "&*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	file := "redis:\n  addr: " + srv.Addr + "\n  username: limiter\n  password_env: RL_TEST_PW\n  prefix: pw\n  timeout: 1s\n  failure_mode: closed\n" + served
	for _, tt := range []struct {
		password string
		want     []int
	}{
		{"wrong-pw", ints(503, 503)}, // Redis refused us; the store fails closed
		{"env-test-pw", ints(200, 200, 200, 429)},
	} {
		t.Setenv("RL_TEST_PW", tt.password)
		rt, h := mount(t, file, buildOpts(quiet())...)
		if strings.Contains(rt.Store(), tt.password) {
			t.Fatalf("Store() %q names the password", rt.Store())
		}
		if got := codes(h, len(tt.want), "GET", "/items", "192.0.2.1:1"); !equal(got, tt.want) {
			t.Fatalf("password %s: %v, want %v", tt.password, got, tt.want)
		}
		if n := countKeys(t, admin, "pw"); (n > 0) != (tt.password == "env-test-pw") {
			t.Fatalf("password %s: %d keys in Redis", tt.password, n)
		}
	}
}

// WithRedisClient: two instances on the application's clients share the
// limits with the file's prefix; Close leaves the client open.
func TestServeWithRedisClient(t *testing.T) {
	addr := redistest.Standalone(t)
	newClient := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	file := "redis:\n  prefix: app\n  timeout: 1s\n" + served
	client := newClient()
	rt, h1 := mount(t, file, buildOpts(quiet(), WithRedisClient(client))...)
	_, h2 := mount(t, file, buildOpts(quiet(), WithRedisClient(newClient()))...)
	sharesLimits(t, h1, h2)
	if n := countKeys(t, client, "app"); n == 0 {
		t.Fatal("no keys under the file's prefix")
	}
	// A reload that changes the store's settings makes a new store on the
	// same client.
	if err := reload(t, rt, edit(t, file, "timeout: 1s", "timeout: 2s")); err != nil {
		t.Fatal(err)
	}
	if got := codes(h1, 1, "GET", "/items", "192.0.2.1:1"); !equal(got, ints(429)) {
		t.Fatalf("after a reload: %v, want the count kept", got)
	}
	if err := rt.Close(closeCtx()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if err := client.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("the application's client after Close: %v", err)
	}
}

// WithStore: two configurations on one application store share its
// counts, and Close leaves it working.
func TestServeWithStore(t *testing.T) {
	store := must(memstore.New())
	rt, h1 := mount(t, served, buildOpts(quiet(), WithStore(store))...)
	_, h2 := mount(t, served, buildOpts(quiet(), WithStore(store))...)
	sharesLimits(t, h1, h2)
	if err := rt.Close(closeCtx()); err != nil {
		t.Fatal(err)
	}
	lim, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(1))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := lim.Allow(context.Background(), "k", 1); err != nil || !res.Allowed {
		t.Fatalf("the application's store after Close: %+v, %v", res, err)
	}
}
