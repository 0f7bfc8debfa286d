package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// ConcurrencyRun is what RunConcurrency saw: the leases granted and
// refused, and the most requests in flight at once.
type ConcurrencyRun struct {
	Admitted, Denied, MaxInFlight int64
}

// RunConcurrency has goroutines per limiter each make attempts on one key,
// holding a granted lease for hold, and fails the test unless the requests
// in flight (counted between Acquire and Release) never exceed limit, some
// were granted and some refused, and the store decided them all.
func RunConcurrency(t *testing.T, ls []algorithms.ConcurrencyLimiter, limit, goroutines, attempts int, hold time.Duration) ConcurrencyRun {
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
	r := ConcurrencyRun{admitted.Load(), denied.Load(), maxSeen.Load()}
	if r.MaxInFlight > int64(limit) || r.Admitted == 0 || r.Denied == 0 {
		t.Fatalf("%+v: want at most %d in flight, some admitted and some denied", r, limit)
	}
	return r
}
