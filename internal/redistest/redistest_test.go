package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestStandaloneSetGet(t *testing.T) {
	addr := Standalone(t)
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":6379") {
		t.Fatalf("address %q: want a loopback address away from the default port", addr)
	}

	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })

	if err := rdb.Set(ctx, "greeting", "hello", time.Minute).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	got, err := rdb.Get(ctx, "greeting").Result()
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	if got != "hello" {
		t.Fatalf("GET greeting = %q, want %q", got, "hello")
	}

	// The server must not persist anything: the tests rely on each server
	// starting empty and leaving nothing behind.
	cfg, err := rdb.ConfigGet(ctx, "save").Result()
	if err != nil {
		t.Fatalf("CONFIG GET save: %v", err)
	}
	if cfg["save"] != "" {
		t.Errorf("save = %q, want snapshots off", cfg["save"])
	}
	cfg, err = rdb.ConfigGet(ctx, "appendonly").Result()
	if err != nil {
		t.Fatalf("CONFIG GET appendonly: %v", err)
	}
	if cfg["appendonly"] != "no" {
		t.Errorf("appendonly = %q, want no", cfg["appendonly"])
	}
}

func TestServersAreIsolated(t *testing.T) {
	a, b := StartServer(t), StartServer(t)
	if a.Addr == b.Addr {
		t.Fatalf("two servers share the address %s", a.Addr)
	}
	ctx := context.Background()
	ra := redis.NewClient(&redis.Options{Addr: a.Addr})
	rb := redis.NewClient(&redis.Options{Addr: b.Addr})
	t.Cleanup(func() { _ = ra.Close(); _ = rb.Close() })

	if err := ra.Set(ctx, "k", "a", 0).Err(); err != nil {
		t.Fatalf("SET on a: %v", err)
	}
	if err := rb.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET k on b: err = %v, want redis.Nil (servers must not share data)", err)
	}
}

func TestStopRefusesConnections(t *testing.T) {
	s := StartServer(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING before Stop: %v", err)
	}

	s.Stop()
	select {
	case <-s.exited:
	default:
		t.Fatal("Stop returned before the process exited")
	}

	conn, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err == nil {
		_ = conn.Close()
		t.Fatalf("dial %s after Stop succeeded, want connection refused", s.Addr)
	}
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("PING through go-redis after Stop succeeded, want an error")
	}

	// Stopping again, also concurrently, is a no-op.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(s.Stop)
	}
	wg.Wait()
}

func TestStopByAddress(t *testing.T) {
	var addr string
	t.Run("owner", func(t *testing.T) {
		addr = Standalone(t)
		Stop(t, addr)
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = conn.Close()
			t.Fatalf("dial %s after Stop(t, addr) succeeded, want connection refused", addr)
		}
		Stop(t, addr) // a second stop by address is a no-op, not a failure
	})
	if addr == "" {
		t.Skip("the owner subtest did not start a server")
	}
	// Once the owning test has ended, the address is forgotten, so a later
	// server on the same port cannot be confused with it.
	registry.Lock()
	_, still := registry.servers[addr]
	registry.Unlock()
	if still {
		t.Fatalf("%s still registered after its test ended", addr)
	}
}

func TestStopUnknownAddressFails(t *testing.T) {
	ft := &fakeTB{TB: t}
	ft.run(func() { Stop(ft, "127.0.0.1:1") })
	if !ft.failed {
		t.Fatal("Stop on an address this package never started did not fail the test")
	}
}

func TestCleanupStopsServerAndRemovesDir(t *testing.T) {
	var s *Server
	t.Run("owner", func(t *testing.T) {
		s = StartServer(t)
	})
	if s == nil {
		t.Skip("the owner subtest did not start a server")
	}
	select {
	case <-s.exited:
	default:
		t.Fatal("server still running after its test ended")
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Fatalf("server folder %s remains after its test ended (stat: %v)", s.Dir, err)
	}
}

// The cluster tests run in parallel with each other because most of their
// time is spent waiting for the nodes to agree on the cluster.
func TestCluster(t *testing.T) {
	t.Parallel()
	addrs := Cluster(t)
	if len(addrs) != 3 {
		t.Fatalf("Cluster returned %d addresses, want 3", len(addrs))
	}

	ctx := context.Background()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })

	info, err := rdb.ClusterInfo(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER INFO: %v", err)
	}
	if fields := parseInfo(info); fields["cluster_state"] != "ok" || fields["cluster_slots_assigned"] != "16384" {
		t.Fatalf("CLUSTER INFO: state %q, slots assigned %q; want ok and 16384\n%s",
			fields["cluster_state"], fields["cluster_slots_assigned"], info)
	}

	// Three masters, each owning a share of the slots.
	var mu sync.Mutex
	masters := make(map[string]bool)
	err = rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		mu.Lock()
		masters[c.Options().Addr] = true
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatalf("ForEachMaster: %v", err)
	}
	if len(masters) != 3 {
		t.Fatalf("cluster has %d masters (%v), want 3", len(masters), masters)
	}

	// Keys spread over the slots, so they land on different nodes: every
	// write must be routed to its owner and read back.
	for i := range 30 {
		key := fmt.Sprintf("key-%d", i)
		if err := rdb.Set(ctx, key, i, time.Minute).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
	}
	for i := range 30 {
		key := fmt.Sprintf("key-%d", i)
		got, err := rdb.Get(ctx, key).Int()
		if err != nil || got != i {
			t.Fatalf("GET %s = %d, %v; want %d", key, got, err, i)
		}
	}

	// A multi-key operation is only legal within one slot; a hash tag keeps
	// both keys there.
	if err := rdb.MSet(ctx, "{user:1}:a", "1", "{user:1}:b", "2").Err(); err != nil {
		t.Fatalf("MSET with a shared hash tag: %v", err)
	}
	vals, err := rdb.MGet(ctx, "{user:1}:a", "{user:1}:b").Result()
	if err != nil || len(vals) != 2 || vals[0] != "1" || vals[1] != "2" {
		t.Fatalf("MGET with a shared hash tag = %v, %v; want [1 2]", vals, err)
	}
}

func TestClusterStopNode(t *testing.T) {
	t.Parallel()
	nodes := StartCluster(t)
	victim := nodes[1]
	victim.Stop()
	if conn, err := net.DialTimeout("tcp", victim.Addr, time.Second); err == nil {
		_ = conn.Close()
		t.Fatalf("dial %s after stopping the node succeeded", victim.Addr)
	}
	for _, n := range []*Server{nodes[0], nodes[2]} {
		if reply, err := command(n.Addr, time.Second, "PING"); err != nil || reply != "PONG" {
			t.Fatalf("surviving node %s: PING = %q, %v", n.Addr, reply, err)
		}
	}
}

func TestParseInfo(t *testing.T) {
	got := parseInfo("# Cluster\r\ncluster_state:ok\r\ncluster_slots_assigned:16384\r\nnoise\r\n")
	if got["cluster_state"] != "ok" || got["cluster_slots_assigned"] != "16384" || len(got) != 2 {
		t.Fatalf("parseInfo = %v", got)
	}
}

func TestPickClusterPort(t *testing.T) {
	for range 20 {
		p, err := pickClusterPort()
		if err != nil {
			t.Fatal(err)
		}
		if p < clusterPortMin || p > clusterPortMax || p+10000 > 65535 {
			t.Fatalf("pickClusterPort = %d, outside %d-%d", p, clusterPortMin, clusterPortMax)
		}
	}
}

func TestRequireUnderCI(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // nothing on PATH
	t.Setenv("CI", "true")
	ft := &fakeTB{TB: t}
	ft.run(func() { Require(ft) })
	if !ft.failed || ft.skipped {
		t.Fatalf("under CI=true without redis-server: failed=%v skipped=%v, want a failure", ft.failed, ft.skipped)
	}
	if !strings.Contains(ft.msg, "redis-server not found; CI requires the real-Redis tests") {
		t.Fatalf("message %q does not explain the failure", ft.msg)
	}
}

func TestRequireWithoutCI(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CI", "")
	ft := &fakeTB{TB: t}
	ft.run(func() { Require(ft) })
	if ft.failed || !ft.skipped {
		t.Fatalf("outside CI without redis-server: failed=%v skipped=%v, want a skip", ft.failed, ft.skipped)
	}
	if !strings.Contains(ft.msg, "redis-server not found") {
		t.Fatalf("message %q does not name the missing program", ft.msg)
	}
}

// The Require tests change PATH and CI for the whole process, so they must
// not run in parallel with tests that start servers; they don't, since a
// test that calls t.Setenv cannot be parallel and parallel tests only start
// once the sequential ones are done.

// fakeTB records Fatalf and Skipf instead of ending the real test, so that
// Require's decisions can be checked.
type fakeTB struct {
	testing.TB
	failed, skipped bool
	msg             string
}

// errStop unwinds the function under test the way runtime.Goexit would.
var errStop = errors.New("stopped")

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
	panic(errStop)
}

func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped, f.msg = true, fmt.Sprintf(format, args...)
	panic(errStop)
}

func (f *fakeTB) run(fn func()) {
	defer func() {
		if r := recover(); r != nil && r != errStop {
			panic(r)
		}
	}()
	fn()
}
