package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
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

// concurrencyRun is what runConcurrency saw.
type concurrencyRun struct {
	Admitted, Denied, MaxInFlight int64
}

// runConcurrency has goroutines per limiter each make attempts on one key,
// holding an admitted lease for hold, and checks that the requests in
// flight (counted between Acquire and Release) never exceed limit, that
// some were admitted and some denied, and that the store decided them all.
func runConcurrency(t *testing.T, ls []algorithms.ConcurrencyLimiter, limit, goroutines, attempts int, hold time.Duration) concurrencyRun {
	t.Helper()
	var inFlight, maxSeen, admitted, denied atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(ls)*goroutines)
	for _, l := range ls {
		for range goroutines {
			wg.Go(func() {
				ctx := context.Background()
				for range attempts {
					lease, err := l.Acquire(ctx, "shared")
					if err != nil {
						errs <- err
						return
					}
					if lease.Decider != algorithms.DecidedByStore {
						errs <- errors.New("decided by " + lease.Decider.String())
						return
					}
					if !lease.Allowed {
						denied.Add(1)
						time.Sleep(hold / 2)
						continue
					}
					admitted.Add(1)
					n := inFlight.Add(1)
					for m := maxSeen.Load(); n > m && !maxSeen.CompareAndSwap(m, n); m = maxSeen.Load() {
					}
					time.Sleep(hold)
					inFlight.Add(-1)
					if err := lease.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r := concurrencyRun{admitted.Load(), denied.Load(), maxSeen.Load()}
	if r.MaxInFlight > int64(limit) || r.Admitted == 0 || r.Denied == 0 {
		t.Fatalf("%+v: want at most %d in flight, some admitted and some denied", r, limit)
	}
	return r
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
