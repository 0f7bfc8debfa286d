package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// Only noeviction, or any policy under maxmemory 0, keeps every key until
// its TTL; any other policy, one of an unknown name included, may evict.
func TestJudgeEvictionPolicy(t *testing.T) {
	tests := []struct {
		policy, maxmemory string
		want              error // nil, ErrEvictionPolicy or ErrEvictionPolicyUnreadable
	}{
		{"noeviction", "1048576", nil},
		{"noeviction", "0", nil},
		{"allkeys-lru", "0", nil},
		{"volatile-ttl", "0", nil},
		{"allkeys-lru", "1048576", ErrEvictionPolicy},
		{"allkeys-lfu", "1048576", ErrEvictionPolicy},
		{"allkeys-random", "1048576", ErrEvictionPolicy},
		{"volatile-lru", "1048576", ErrEvictionPolicy},
		{"volatile-lfu", "1048576", ErrEvictionPolicy},
		{"volatile-random", "1048576", ErrEvictionPolicy},
		{"volatile-ttl", "1048576", ErrEvictionPolicy},
		{"allkeys-someday", "1048576", ErrEvictionPolicy},
		{"allkeys-lru", "", ErrEvictionPolicy}, // maxmemory not said: it may be set
		{"", "0", nil},
	}
	for _, tt := range tests {
		m := map[string]string{"maxmemory-policy": tt.policy, "maxmemory": tt.maxmemory}
		if tt.policy == "" {
			delete(m, "maxmemory-policy")
			tt.want = ErrEvictionPolicyUnreadable
		}
		err := judgeEvictionPolicy(m)
		if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("%q with maxmemory %q: %v, want %v", tt.policy, tt.maxmemory, err, tt.want)
		}
		if tt.want == ErrEvictionPolicy && !strings.Contains(err.Error(), tt.policy) {
			t.Errorf("%q: %v does not name the policy", tt.policy, err)
		}
	}
}

// A refusal for good (an ACL, a renamed command) is told from a passing
// state of the server and from a failed connection.
func TestConfigRefused(t *testing.T) {
	tests := []struct {
		err     error
		refused bool
	}{
		{fakeRedisError("NOPERM User limiter has no permissions to run the 'config|get' command"), true},
		{fakeRedisError("ERR unknown command 'config', with args beginning with: 'get' 'maxmemory*'"), true},
		{fakeRedisError("LOADING Redis is loading the dataset in memory"), false},
		{fakeRedisError("CLUSTERDOWN The cluster is down"), false},
		{fakeRedisError("BUSY Redis is busy running a script."), false},
		{&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, false},
		{redis.ErrClosed, false},
		{redis.Nil, false},
	}
	for _, tt := range tests {
		if got := configRefused(tt.err); got != tt.refused {
			t.Errorf("%v: refused %v, want %v", tt.err, got, tt.refused)
		}
	}
}

// CheckEvictionPolicy reports what the server (each master of a Cluster)
// is set to, naming the policy and never the server.
func TestCheckEvictionPolicy(t *testing.T) {
	ctx := context.Background()
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	tests := []struct {
		policy, maxmemory string
		evicts            bool
	}{
		{"noeviction", "100mb", false},
		{"allkeys-lru", "100mb", true},
		{"volatile-lru", "100mb", true},
		{"allkeys-lfu", "100mb", true},
		{"volatile-ttl", "100mb", true},
		{"allkeys-lru", "0", false}, // no limit, nothing evicted
	}
	for _, tt := range tests {
		setPolicy(t, c, tt.policy, tt.maxmemory)
		err := CheckEvictionPolicy(ctx, c)
		if got := errors.Is(err, ErrEvictionPolicy); got != tt.evicts || !tt.evicts && err != nil {
			t.Errorf("%s, maxmemory %s: %v, want evicting %v", tt.policy, tt.maxmemory, err, tt.evicts)
			continue
		}
		if tt.evicts && (!strings.Contains(err.Error(), tt.policy) || strings.Contains(err.Error(), srv.Addr)) {
			t.Errorf("%s: %q should name the policy and not the server", tt.policy, err)
		}
	}
	if err := CheckEvictionPolicy(ctx, nil); !errors.Is(err, algorithms.ErrInvalidOption) {
		t.Errorf("nil client: %v", err)
	}
	srv.Stop()
	if err := CheckEvictionPolicy(ctx, c); err == nil || errors.Is(err, ErrEvictionPolicy) || errors.Is(err, ErrEvictionPolicyUnreadable) {
		t.Errorf("stopped server: %v, want Redis's error alone", err)
	}
}

// On a Cluster one evicting master is enough to be told of.
func TestCheckEvictionPolicyCluster(t *testing.T) {
	ctx := context.Background()
	addrs := redistest.Cluster(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = cc.Close() })
	if err := CheckEvictionPolicy(ctx, cc); err != nil {
		t.Fatalf("every master noeviction: %v", err)
	}
	var mu sync.Mutex
	var masters []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters = append(masters, node.Options().Addr)
		return nil
	})
	if err != nil || len(masters) < 2 {
		t.Fatalf("masters %v: %v", masters, err)
	}
	for _, addr := range masters {
		one := redis.NewClient(&redis.Options{Addr: addr})
		setPolicy(t, one, "volatile-lru", "100mb")
		err := CheckEvictionPolicy(ctx, cc)
		setPolicy(t, one, "noeviction", "0")
		_ = one.Close()
		if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), "volatile-lru") {
			t.Fatalf("one master of %d volatile-lru: %v", len(masters), err)
		}
	}
}

// Of a Cluster's masters the worst answer counts: evicting, then not
// answered, then refused, then nil; whatever their order.
func TestWorseRead(t *testing.T) {
	evicts := &evictionError{policy: "allkeys-lru", maxmemory: "1"}
	refused := fmt.Errorf("%w: NOPERM", ErrEvictionPolicyUnreadable)
	lost := errors.New("i/o timeout")
	tests := []struct {
		reads []error
		want  error
	}{
		{[]error{nil, nil, nil}, nil},
		{[]error{nil, evicts, nil}, evicts},
		{[]error{refused, evicts, lost}, evicts},
		{[]error{evicts, refused, lost}, evicts},
		{[]error{nil, refused, nil}, refused},
		{[]error{refused, lost, nil}, lost},
		{[]error{lost, refused}, lost},
	}
	for _, tt := range tests {
		var worst error
		for _, r := range tt.reads {
			worst = worseRead(worst, r)
		}
		if worst != tt.want {
			t.Errorf("%v: %v, want %v", tt.reads, worst, tt.want)
		}
	}
}

// setPolicy sets a server's maxmemory and maxmemory-policy.
func setPolicy(t testing.TB, c *redis.Client, policy, maxmemory string) {
	t.Helper()
	ctx := context.Background()
	for _, kv := range [][2]string{{"maxmemory-policy", policy}, {"maxmemory", maxmemory}} {
		if err := c.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatalf("CONFIG SET %s %s: %v", kv[0], kv[1], err)
		}
	}
}
