package redistest

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestKillAndRestart(t *testing.T) {
	s := StartServer(t)
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("a killed server answered")
	}
	s.Restart()
	if reply, err := s.Do("PING"); err != nil || reply != "PONG" {
		t.Fatalf("after Restart: %q %v", reply, err)
	}
	// No persistence: it comes back empty.
	if _, err := s.Do("GET", "k"); err == nil || !strings.Contains(err.Error(), "nil") {
		t.Fatalf("GET after a restart: %v, want a nil reply", err)
	}
	s.Stop()
	s.Restart() // after a clean stop too
	if reply, err := s.Do("PING"); err != nil || reply != "PONG" {
		t.Fatalf("after Stop and Restart: %q %v", reply, err)
	}
}

func TestFreezeAndThaw(t *testing.T) {
	s := StartServer(t)
	conn, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s.Freeze()
	if _, err := command(s.Addr, 200*time.Millisecond, "PING"); err == nil {
		t.Fatal("a frozen server answered")
	}
	s.Thaw()
	if reply, err := s.Do("PING"); err != nil || reply != "PONG" {
		t.Fatalf("after Thaw: %q %v", reply, err)
	}
	s.Freeze() // the cleanup must stop a frozen server too
}

func TestSentinelFailover(t *testing.T) {
	ss := StartSentinel(t)
	if addr, err := ss.MasterAddr(); err != nil || addr != ss.Master.Addr {
		t.Fatalf("master %q %v, want %s", addr, err, ss.Master.Addr)
	}
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: ss.MasterName, SentinelAddrs: ss.Addrs, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	ss.Master.Kill()
	master := ss.WaitFailover()
	if master != ss.Replica.Addr {
		t.Fatalf("new master %s, want the replica %s", master, ss.Replica.Addr)
	}
	t.Logf("failover in %s", time.Since(began).Round(time.Millisecond))
	if err := waitFor(10*time.Second, func() error { return c.Set(ctx, "k", "after", 0).Err() }); err != nil {
		t.Fatalf("the failover client cannot write after the failover: %v", err)
	}
}

func TestClusterFailover(t *testing.T) {
	cs := StartClusterWithReplicas(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cs.Addrs, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for _, k := range keys {
		if err := c.Set(ctx, k, "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	cs.Masters[0].Kill()
	cs.WaitFailover(t, cs.Masters[0])
	t.Logf("failover in %s", time.Since(began).Round(time.Millisecond))
	// go-redis learns of the new master when it next loads the slot map:
	// by itself within about ten seconds; asked, at once.
	c.ReloadState(ctx)
	for _, k := range keys {
		if err := waitFor(10*time.Second, func() error { return c.Set(ctx, k, "2", 0).Err() }); err != nil {
			t.Fatalf("SET %s after the failover: %v", k, err)
		}
	}
}
