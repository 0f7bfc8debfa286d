package redisstore

// Redis that may evict rate-limit state is not trusted to decide.
//
// An evicted state reads as no state: the client it counted gets its whole
// quota again. Every key the store writes has a TTL, so a volatile-*
// maxmemory-policy may evict it as readily as an allkeys-* one (with
// allkeys-lru and a small maxmemory, a flood of 40,000 new identities
// evicted an exhausted client's state and a 10/hour limit admitted 20).
// Only noeviction keeps every state until its TTL; so does any policy while
// maxmemory is 0, since Redis then never evicts (for as long as it stays 0:
// the store reads both again every minute). A policy of any other name,
// one Redis may add later included, counts as evicting.
//
// The invariant: a store whose Redis may evict its keys decides by its
// FailureMode, not in Redis, unless WithEvictionAllowed accepts the risk
// (TestEvictionFloodKeepsExhaustedClient, TestStoreDistrustsEvictingRedis);
// CheckEvictionPolicy reports the policy (TestCheckEvictionPolicy). A
// policy that cannot be read (CONFIG refused by an ACL or renamed) is
// trusted, logged once (TestEvictionPolicyUnreadable). The store's side is
// in eviction_watch.go.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
)

// ErrEvictionPolicy reports a Redis server whose maxmemory-policy may evict
// the store's keys: anything but noeviction, with maxmemory set. The error
// that wraps it names the policy.
var ErrEvictionPolicy = errors.New("redisstore: Redis may evict rate-limit state: set maxmemory-policy noeviction")

// ErrEvictionPolicyUnreadable reports a Redis server that refused to say
// its maxmemory-policy: CONFIG GET denied by an ACL, or renamed or disabled
// (as managed services often do).
var ErrEvictionPolicyUnreadable = errors.New("redisstore: Redis's maxmemory-policy could not be read (CONFIG GET refused)")

// evictionError names the policy of a server that may evict the store's
// keys; it wraps ErrEvictionPolicy. It never names a server.
type evictionError struct {
	policy    string
	maxmemory string // bytes, as CONFIG GET says it
}

func (e *evictionError) Error() string {
	return fmt.Sprintf("%s (maxmemory-policy %q, maxmemory %q)", ErrEvictionPolicy, e.policy, e.maxmemory)
}

func (e *evictionError) Unwrap() error { return ErrEvictionPolicy }

// CheckEvictionPolicy asks the server (every master of a Cluster) for its
// maxmemory-policy and maxmemory, and returns nil when Redis keeps every
// key until its TTL (noeviction, or maxmemory 0); an error wrapping
// ErrEvictionPolicy, naming the policy, when it may evict the store's
// keys; one wrapping ErrEvictionPolicyUnreadable when CONFIG GET is
// refused; or Redis's error, wrapped, when it cannot tell. Call it at
// startup to fail early: a store on an evicting Redis otherwise decides by
// its FailureMode (see WithEvictionAllowed).
func CheckEvictionPolicy(ctx context.Context, client redis.UniversalClient) error {
	if isNilValue(client) {
		return fmt.Errorf("%w: nil Redis client", algorithms.ErrInvalidOption)
	}
	return readEvictionPolicy(ctx, client)
}

// readEvictionPolicy is CheckEvictionPolicy for a client that is not nil.
// Of a Cluster's masters, the worst answer counts (see worseRead).
func readEvictionPolicy(ctx context.Context, client redis.UniversalClient) error {
	switch c := client.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		var worst error
		err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			got := readNodePolicy(ctx, node)
			mu.Lock()
			worst = worseRead(worst, got)
			mu.Unlock()
			return nil
		})
		if err != nil {
			worst = worseRead(worst, fmt.Errorf("redisstore: eviction policy: %w", err))
		}
		return worst
	case *redis.Client:
		return readNodePolicy(ctx, c)
	}
	return readNodePolicy(ctx, client)
}

// readNodePolicy asks one server. "maxmemory*" names both settings in one
// command on any Redis from 5.0 (several arguments need 7.0).
func readNodePolicy(ctx context.Context, c redis.Cmdable) error {
	m, err := c.ConfigGet(ctx, "maxmemory*").Result()
	if err != nil {
		if configRefused(err) {
			return fmt.Errorf("%w: %w", ErrEvictionPolicyUnreadable, err)
		}
		return fmt.Errorf("redisstore: eviction policy: %w", err)
	}
	return judgeEvictionPolicy(m)
}

// judgeEvictionPolicy judges CONFIG GET's answer: nil when Redis never
// evicts, an *evictionError when it may.
func judgeEvictionPolicy(m map[string]string) error {
	policy, ok := m["maxmemory-policy"]
	if !ok {
		return fmt.Errorf("%w: CONFIG GET names no maxmemory-policy", ErrEvictionPolicyUnreadable)
	}
	if strings.EqualFold(policy, "noeviction") {
		return nil
	}
	if n, err := strconv.ParseInt(m["maxmemory"], 10, 64); err == nil && n == 0 {
		return nil // no limit: nothing is evicted, whatever the policy
	}
	return &evictionError{policy: policy, maxmemory: m["maxmemory"]}
}

// configRefused reports whether err is Redis refusing CONFIG GET for good
// (an ACL, a renamed or disabled command), not a passing state such as a
// server loading its data or a Cluster in failover.
func configRefused(err error) bool {
	var redisErr redis.Error
	if !errors.As(err, &redisErr) || errors.Is(err, redis.Nil) {
		return false
	}
	for _, passing := range []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "MOVED", "ASK"} {
		if strings.HasPrefix(err.Error(), passing+" ") {
			return false
		}
	}
	return true
}

// worseRead returns the worse of two masters' answers: an evicting one
// first, then one Redis did not give (unknown), then a refusal, then nil.
func worseRead(a, b error) error {
	if readRank(b) > readRank(a) {
		return b
	}
	return a
}

func readRank(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrEvictionPolicyUnreadable):
		return 1
	case errors.Is(err, ErrEvictionPolicy):
		return 3
	}
	return 2
}
