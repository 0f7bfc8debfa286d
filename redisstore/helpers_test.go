package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

func mustConcurrency(t testing.TB, store algorithms.Store, limit int, lease time.Duration, opts ...algorithms.ConcurrencyOption) algorithms.ConcurrencyLimiter {
	t.Helper()
	l, err := algorithms.NewConcurrency(store, limit, lease, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustAcquire(t testing.TB, l algorithms.ConcurrencyLimiter, key string) *algorithms.Lease {
	t.Helper()
	lease, err := l.Acquire(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

func mustNew(t testing.TB, store algorithms.Store, alg algorithms.Algorithm, limits ...algorithms.Limit) algorithms.Limiter {
	t.Helper()
	l, err := algorithms.New(store, alg, limits...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func pass(limit, remaining int, reset, period time.Duration) algorithms.Result {
	return algorithms.Result{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset, Period: period}
}
