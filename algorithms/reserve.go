package algorithms

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Reservations: shaping traffic instead of refusing it. A request that the
// bucket algorithms would admit within a delay is admitted now, its units
// taken now, and told to proceed after the delay: the leaky bucket's
// backlog may pass its capacity, and the token bucket's level go below
// zero, by as much as drains (refills) within the delay. The requests after
// it find the bucket that much fuller, so a reservation is charged exactly
// like a request that waited and then passed. The window algorithms have
// no such measure (a window's count cannot be spent before the window it
// belongs to opens) and refuse reservations.

// MaxDelay is the longest delay a reservation may be asked to wait.
const MaxDelay = time.Hour

// CanReserve reports whether l is a limiter New returned for an algorithm
// that can reserve: TokenBucket or LeakyBucket.
func CanReserve(l Limiter) bool {
	r, ok := l.(RateLimiter)
	return ok && r != nil && reserves(r.Algorithm())
}

func reserves(alg Algorithm) bool { return alg == TokenBucket || alg == LeakyBucket }

// checkReserve validates a reservation's algorithm and delay.
func checkReserve(alg Algorithm, maxDelay time.Duration) error {
	switch {
	case !reserves(alg):
		return fmt.Errorf("%w: %s cannot delay a request; only %s and %s can", ErrInvalidOption, alg, TokenBucket, LeakyBucket)
	case maxDelay < 0 || maxDelay > MaxDelay:
		return fmt.Errorf("%w: delay %s must be from 0 to %s", ErrInvalidOption, maxDelay, MaxDelay)
	}
	return nil
}

// delayed is the verdict of a bucket that lacks excess (in 1/rate of a unit
// for the leaky bucket, of a token for the token bucket) for the request,
// when that much drains or refills within maxDelay µs: admitted, with
// nothing left and the wait in µs. ok is false when it does not, or when
// the bucket's numbers would leave the range the scripts compute exactly
// in (only for the very largest limits, whose capacity nears it already).
func delayed(excess, capacity, now, nowUS int64, p params, maxDelay int64) (verdict, bool) {
	if excess > maxExact-2*capacity {
		return verdict{}, false
	}
	wait := toMicros(ceilDiv(excess, p.rate), nowUS, now, p.unit)
	if wait > maxDelay {
		return verdict{}, false
	}
	return verdict{ok: true, reset: ceilDiv(capacity+excess, p.rate), wait: wait}, true
}

// Reserve implements RateLimiter. Like Allow it never waits, and fails only
// for invalid requests.
func (l *memoryLimiter) Reserve(_ context.Context, key string, cost int, maxDelay time.Duration) (Result, error) {
	if err := checkReserve(l.alg, maxDelay); err != nil {
		return Result{}, err
	}
	if err := checkRequest(l.alg, l.limits, key, cost); err != nil {
		return Result{}, err
	}
	return l.decide(key, cost, maxDelay.Microseconds()), nil
}

// Reserve implements RateLimiter. It asks Redis in a call of its own (the
// reservation form of the script's costs, "d<max µs>:<cost>"), bounded by
// the store's timeout like Allow. A denial cached for key answers it when
// the denial's RetryAfter is longer than maxDelay (the wait a reservation
// would be given is that same RetryAfter). When Redis cannot decide, the
// request is decided as Allow decides it then, by the FailureMode, with no
// delay: the local twin does not reserve.
func (l *redisLimiter) Reserve(ctx context.Context, key string, cost int, maxDelay time.Duration) (Result, error) {
	if err := checkReserve(l.alg, maxDelay); err != nil {
		return Result{}, err
	}
	if maxDelay == 0 {
		return l.Allow(ctx, key, cost)
	}
	if err := checkRequest(l.alg, l.limits, key, cost); err != nil {
		return Result{}, err
	}
	if ctx == nil {
		ctx = context.Background() // a caller's slip, not worth a panic
	}
	g := l.guard
	now := g.clock()
	if res, ok := g.denials.lookup(l, key, cost, now); ok && res.RetryAfter > maxDelay {
		return res, nil
	}
	if err := ctx.Err(); err != nil {
		return l.ended(ctx, key, cost, err)
	}
	ok, probe := g.breaker.Allow(now)
	if !ok {
		return l.fail(key, cost, errBreakerOpen)
	}
	list := "d" + strconv.FormatInt(maxDelay.Microseconds(), 10) + ":" + strconv.Itoa(cost)
	var res []Result
	err := l.within(ctx, func(ctx context.Context) error {
		var err error
		res, err = l.run(ctx, key, list, 1, true)
		return err
	})
	g.breaker.Record(g.clock(), err == nil || classify(err) == ErrorScript, probe)
	if err != nil {
		g.reloadSlots()
		g.reportError(err, now)
		if ctx.Err() != nil {
			return l.ended(ctx, key, cost, ctx.Err())
		}
		return l.fail(key, cost, err)
	}
	if !res[0].Allowed {
		g.denials.remember(l, key, cost, now, res[0])
	}
	return res[0], nil
}
