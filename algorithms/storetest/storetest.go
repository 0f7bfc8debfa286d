// Package storetest holds test helpers for code that rate-limits, as
// net/http/httptest does for HTTP: ManualClock, a clock a test moves, for a
// store's and the middleware's WithClock; and the conformance suite of
// algorithms.Store: the scripted sequences every store must answer alike
// (the memory store, the Redis store on one server and on a Cluster, and
// any store of your own), and the contract of the limiters a store makes.
// Call the suite from a test:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) algorithms.Store { return newMyStore(t) })
//	}
package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// realTolerance bounds how far a real-time run's durations may stray: the
// sleep before a step and the round trip add a little to each step.
const realTolerance = 40 * ms

// maxLateness is how late a real-time step may complete and still count:
// the steps keep 50ms from every boundary and durations are compared within
// realTolerance.
const maxLateness = 30 * ms

// Run runs the suite on stores that newStore makes, one per sequence, in
// real time: each sequence takes about two seconds (they run in
// parallel), and durations are compared within 40ms. A run in which a step
// came late (a loaded machine) proves nothing and is run again, up to five
// times. Stores that newStore makes must not share state.
func Run(t *testing.T, newStore func(t *testing.T) algorithms.Store) {
	t.Helper()
	run(t, func(t *testing.T) (algorithms.Store, func(time.Duration), time.Duration) {
		store := newStore(t)
		begin := time.Now().Add(20 * ms)
		return store, func(at time.Duration) { time.Sleep(time.Until(begin.Add(at))) }, realTolerance
	}, true)
	checkContract(t, newStore)
}

// RunClocked runs the sequences on stores whose clock the test sets:
// newStore returns a store and a function that moves its clock to a fixed
// start plus at (it is called with increasing at). Every field must match
// exactly.
func RunClocked(t *testing.T, newStore func(t *testing.T) (algorithms.Store, func(at time.Duration))) {
	t.Helper()
	run(t, func(t *testing.T) (algorithms.Store, func(time.Duration), time.Duration) {
		store, moveTo := newStore(t)
		return store, moveTo, 0
	}, false)
}

type newRun func(t *testing.T) (algorithms.Store, func(at time.Duration), time.Duration)

func run(t *testing.T, newStore newRun, realTime bool) {
	for _, seq := range sequences {
		t.Run(seq.name, func(t *testing.T) {
			t.Parallel()
			// A real-time run with a late step is set aside and run again;
			// a run on time must match.
			const attempts = 5
			for attempt := 1; ; attempt++ {
				mismatches, late := runSequence(t, newStore, seq, realTime)
				if !late {
					for _, m := range mismatches {
						t.Error(m)
					}
					return
				}
				if attempt == attempts {
					t.Fatalf("every one of %d runs had a step more than %s late: the machine is too loaded to time this sequence", attempts, maxLateness)
				}
				t.Logf("run %d had a late step (%d mismatches); running again", attempt, len(mismatches))
			}
		})
	}
}

// runSequence runs seq once and returns its mismatches, and whether a step
// completed later than maxLateness (only in real time).
func runSequence(t *testing.T, newStore newRun, seq sequence, realTime bool) (mismatches []string, late bool) {
	store, moveTo, tol := newStore(t)
	limiters := make([]algorithms.Limiter, len(seq.limiters))
	for i, spec := range seq.limiters {
		l, err := algorithms.New(store, spec.alg, spec.limits...)
		if err != nil {
			t.Fatalf("algorithms.New(%s, %v): %v", spec.alg, spec.limits, err)
		}
		limiters[i] = l
	}
	ctx := context.Background()
	var first time.Time
	for i, s := range seq.steps {
		moveTo(s.at)
		if i == 0 {
			first = time.Now()
		}
		key, cost := s.key, s.cost
		if key == "" {
			key = "a"
		}
		if cost == 0 {
			cost = 1
		}
		got, err := limiters[s.limiter].Allow(ctx, key, cost)
		if err != nil {
			t.Fatalf("step %d (at %s): %v", i, s.at, err)
		}
		if realTime && time.Since(first)-s.at > maxLateness {
			late = true
		}
		if msg := CompareResult(got, s.want, tol); msg != "" {
			mismatches = append(mismatches, fmt.Sprintf("step %d (at %s, limiter %d, key %q, cost %d): %s\n got  %+v\n want %+v",
				i, s.at, s.limiter, key, cost, msg, got, s.want))
		}
	}
	return mismatches, late
}

// CompareResult returns what differs between got and want, durations
// within tol, or "" when nothing does.
func CompareResult(got, want algorithms.Result, tol time.Duration) string {
	var diffs []string
	if got.Allowed != want.Allowed {
		diffs = append(diffs, "Allowed")
	}
	if got.Limit != want.Limit {
		diffs = append(diffs, "Limit")
	}
	if got.Remaining != want.Remaining {
		diffs = append(diffs, "Remaining")
	}
	if got.Period != want.Period {
		diffs = append(diffs, "Period")
	}
	if got.Index != want.Index {
		diffs = append(diffs, "Index")
	}
	near := func(a, b time.Duration) bool { d := a - b; return d <= tol && d >= -tol }
	if !near(got.RetryAfter, want.RetryAfter) || (got.RetryAfter == 0) != (want.RetryAfter == 0) {
		diffs = append(diffs, "RetryAfter")
	}
	if !near(got.ResetAfter, want.ResetAfter) {
		diffs = append(diffs, "ResetAfter")
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprintf("%s differ (tolerance %s)", strings.Join(diffs, ", "), tol)
}

// checkContract checks what every limiter a store makes must do beyond
// Allow: describe itself, refuse bad requests with the documented errors,
// peek without consuming, reset, and hold a concurrency limit.
func checkContract(t *testing.T, newStore func(t *testing.T) algorithms.Store) {
	t.Run("contract", func(t *testing.T) {
		store := newStore(t)
		ctx := context.Background()
		l, err := algorithms.New(store, algorithms.TokenBucket, algorithms.PerMinute(2), algorithms.PerHour(100).WithBurst(50))
		if err != nil {
			t.Fatal(err)
		}
		if l.Algorithm() != algorithms.TokenBucket || !l.Algorithm().CanReserve() {
			t.Errorf("Algorithm %q, CanReserve %v; want %q, true", l.Algorithm(), l.Algorithm().CanReserve(), algorithms.TokenBucket)
		}
		if ps := l.Policies(); len(ps) != 2 || ps[0].Quota != 2 || ps[1].Quota != 50 {
			t.Errorf("Policies %+v, want quotas 2 and 50 in order", ps)
		}
		for _, tc := range []struct {
			key  string
			cost int
			want error
		}{
			{"", 1, algorithms.ErrInvalidKey},
			{strings.Repeat("k", algorithms.MaxKeyLength+1), 1, algorithms.ErrInvalidKey},
			{"k", 0, algorithms.ErrInvalidCost},
			{"k", 3, algorithms.ErrCostExceedsLimit},
		} {
			if _, err := l.Allow(ctx, tc.key, tc.cost); !errors.Is(err, tc.want) {
				t.Errorf("Allow(key of %d bytes, cost %d): %v, want %v", len(tc.key), tc.cost, err, tc.want)
			}
		}
		for range 2 {
			if r, err := l.Peek(ctx, "k"); err != nil || !r.Allowed || r.Remaining != 1 {
				t.Fatalf("Peek of a fresh key: %+v, %v; want allowed with 1 left after it", r, err)
			}
		}
		for i, want := range []bool{true, true, false} {
			if r, err := l.Allow(ctx, "k", 1); err != nil || r.Allowed != want {
				t.Fatalf("request %d: %+v, %v; want allowed %v", i+1, r, err, want)
			}
		}
		if err := l.Reset(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		if r, err := l.Allow(ctx, "k", 2); err != nil || !r.Allowed {
			t.Fatalf("after Reset: %+v, %v; want allowed", r, err)
		}
		checkConcurrency(t, store)
	})
}

// checkConcurrency checks that a concurrency limit of 2 admits two leases,
// refuses a third, and admits again once one is released.
func checkConcurrency(t *testing.T, store algorithms.Store) {
	ctx := context.Background()
	c, err := algorithms.NewConcurrency(store, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var held []*algorithms.Lease
	for i, want := range []bool{true, true, false} {
		lease, err := c.Acquire(ctx, "c")
		if err != nil || lease.Allowed != want {
			t.Fatalf("lease %d: %+v, %v; want allowed %v", i+1, lease, err, want)
		}
		held = append(held, lease)
	}
	if err := held[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if lease, err := c.Acquire(ctx, "c"); err != nil || !lease.Allowed {
		t.Fatalf("after a release: %+v, %v; want allowed", lease, err)
	}
}
