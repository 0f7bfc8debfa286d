package storetest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/memstore"
)

// countingStore is a store of a user's own making, written only against
// the exported API: it wraps another store's limiters and counts the
// decisions they make, as a store adding metrics or logging would.
type countingStore struct {
	inner     algorithms.Store
	decisions *atomic.Int64
}

func (s *countingStore) NewLimiter(alg algorithms.Algorithm, limits []algorithms.Limit) (algorithms.RateLimiter, error) {
	l, err := s.inner.NewLimiter(alg, limits)
	if err != nil {
		return nil, err
	}
	return &countingLimiter{RateLimiter: l, n: s.decisions}, nil
}

func (s *countingStore) NewConcurrency(limit int, lease, retryAfter time.Duration) (algorithms.ConcurrencyLimiter, error) {
	return s.inner.NewConcurrency(limit, lease, retryAfter)
}

type countingLimiter struct {
	algorithms.RateLimiter
	n *atomic.Int64
}

func (l *countingLimiter) Allow(ctx context.Context, key string, cost int) (algorithms.Result, error) {
	l.n.Add(1)
	return l.RateLimiter.Allow(ctx, key, cost)
}

func TestUserStoreClocked(t *testing.T) {
	var decisions atomic.Int64
	// The sequences run in parallel subtests, which end before cleanup:
	// the suite must have decided through the wrapper, not around it.
	t.Cleanup(func() {
		if decisions.Load() == 0 {
			t.Error("no decision went through the user's store")
		}
	})
	storetest.RunClocked(t, func(t *testing.T) (algorithms.Store, func(time.Duration)) {
		clock := storetest.NewManualClock(time.Unix(1_800_000_000, 0))
		start := clock.Now()
		s := &countingStore{inner: must(memstore.New(memstore.WithClock(clock.Now))), decisions: &decisions}
		return s, func(at time.Duration) { clock.Set(start.Add(at)) }
	})
}

func TestUserStore(t *testing.T) {
	var decisions atomic.Int64
	storetest.Run(t, func(t *testing.T) algorithms.Store {
		return &countingStore{inner: must(memstore.New()), decisions: &decisions}
	})
}
