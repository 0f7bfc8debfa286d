package algorithms

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redlimit/redlimit/internal/pause"
)

// ErrWaitExceedsDeadline is returned (wrapped) by Wait when the request's
// turn is further off than the context's deadline: Wait returns it at once,
// consuming nothing, rather than wait in vain. It wraps
// context.DeadlineExceeded, so errors.Is(err, context.DeadlineExceeded)
// holds for it as for a deadline that has passed.
var ErrWaitExceedsDeadline = fmt.Errorf("algorithms: the request's turn is past the context's deadline: %w", context.DeadlineExceeded)

// Wait blocks until a request of cost for key may pass l, and returns its
// admission: the distributed form of x/time/rate's Limiter.Wait, for
// services that pace their calls to a shared upstream. Every instance that
// waits on limiters of one store (the memory store in a process; a Redis
// store, exact or under WithLeases, across processes) keeps within the
// limit together.
//
// The invariant: Wait admits only what l admits, and counts it as l does.
// It returns either a Result that l allowed, with a nil error, or an
// error, with a Result that is not Allowed (the denial that said when the
// request could pass, for ErrWaitExceedsDeadline; the zero Result
// otherwise). It never waits past ctx: a turn further off than ctx's
// deadline fails at once with ErrWaitExceedsDeadline, consuming nothing,
// and a ctx that ends during a wait ends it with ctx.Err().
//
//   - The buckets (CanReserve: TokenBucket, LeakyBucket) reserve: Wait asks
//     Reserve to admit the request within the time left before ctx's
//     deadline (MaxDelay when ctx has none; a turn past it is asked for
//     again, MaxDelay before it comes), then sleeps the reservation's
//     Delay. The units are taken when reserved, so the wait is exact, and
//     fair across instances: turns go in the order of the reservations. A
//     ctx that ends during the sleep gives the units back (Refund), when
//     the store itself counted them; as grpclimit's WithRefundOnCancel, the
//     requests reserved behind keep their later turns while new ones may
//     take the units given back, so a burst may pass the bucket's by them,
//     the rate over longer spans is kept. A reservation a failure mode made
//     (Redis unreachable) keeps its units.
//   - The window algorithms, and a Limiter that is not a RateLimiter, are
//     asked again: Allow, and while it denies, sleep its RetryAfter plus a
//     random jitter of up to a tenth of it (up to 2ms when a tenth is
//     less), so that the instances a window end wakes do not all ask at
//     once. Turns are not in order: a waiter may be overtaken by one that
//     asked later.
//
// Results decided by a failure mode are what Allow or Reserve return: an
// admission decided locally or DecidedFailOpen is returned as an admission;
// a DecidedFailClosed denial is waited out like any other, for its
// RetryAfter (one second on the Redis store), as long as ctx allows.
//
// It returns an error wrapping ErrInvalidOption for a nil l,
// ErrInvalidCost for a cost below 1, ErrCostExceedsLimit for a cost above
// the quota (at once: no wait could admit it), and l's errors as l returns
// them. Tests: TestWaitRefusesAtOnce, TestWaitPacesEveryAlgorithm,
// TestWaitTurnPastDeadline, TestWaitCancelRefunds, TestWaitFailureModes
// (memory store and a scripted Limiter), and in package redisstore
// TestWaitAcrossStores (three stores, exact and leased).
func Wait(ctx context.Context, l Limiter, key string, cost int) (Result, error) {
	if l == nil {
		return Result{}, fmt.Errorf("%w: Wait on a nil limiter", ErrInvalidOption)
	}
	if cost < 1 {
		return Result{}, fmt.Errorf("%w: Wait for %d", ErrInvalidCost, cost)
	}
	rl, reserving := l.(RateLimiter)
	reserving = reserving && rl.Algorithm().CanReserve()
	for {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		dl, hasDeadline := ctx.Deadline()
		var res Result
		var err error
		maxDelay := MaxDelay
		if reserving {
			if hasDeadline {
				maxDelay = min(max(time.Until(dl), 0), MaxDelay)
			}
			res, err = rl.Reserve(ctx, key, cost, maxDelay)
		} else {
			res, err = l.Allow(ctx, key, cost)
		}
		reserved := time.Now()
		if err != nil {
			return Result{}, err
		}
		if res.Allowed {
			if res.Delay > 0 {
				if err := pause.For(ctx, res.Delay); err != nil {
					if res.Decider == DecidedByStore {
						refund(ctx, rl, key, cost, time.Since(reserved))
					}
					return Result{}, err
				}
			}
			return res, nil
		}
		wait := res.RetryAfter
		if reserving && wait > maxDelay {
			wait -= maxDelay // when the turn is within maxDelay, reserve it
		}
		wait = max(wait, time.Millisecond)
		var left time.Duration
		if hasDeadline {
			left = time.Until(dl)
			if res.RetryAfter > left {
				return res, fmt.Errorf("%w: turn in %s, deadline in %s", ErrWaitExceedsDeadline, res.RetryAfter.Round(time.Microsecond), max(left, 0).Round(time.Microsecond))
			}
		}
		nap := wait + jitter(wait)
		if hasDeadline {
			nap = min(nap, max(left, wait))
		}
		if err := pause.For(ctx, nap); err != nil {
			return Result{}, err
		}
	}
}

// jitter is a random pause below a tenth of wait, or below 2ms when that
// is more.
func jitter(wait time.Duration) time.Duration {
	return rand.N(max(wait/10, 2*time.Millisecond))
}

// refund gives back a reservation whose wait ended early, within the
// decision's bound (at least a second), whatever ctx says: ctx has ended.
func refund(ctx context.Context, l RateLimiter, key string, cost int, age time.Duration) {
	bound := time.Second
	if b, ok := l.(DecisionBounder); ok {
		bound = max(bound, b.DecisionTimeout())
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	_, _ = l.Refund(rctx, key, cost, age)
}
