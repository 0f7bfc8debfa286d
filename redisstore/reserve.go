package redisstore

import (
	"context"
	"strconv"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// Reserve implements RateLimiter. It asks Redis in a call of its own (the
// reservation form of the script's costs, "d<max µs>:<cost>"), bounded by
// the store's timeout like Allow. A denial cached for key answers it when
// the denial's RetryAfter is longer than maxDelay (the wait a reservation
// would be given is that same RetryAfter). When Redis cannot decide, the
// request is decided as Allow decides it then, by the FailureMode, with no
// delay: the local twin does not reserve.
func (l *redisLimiter) Reserve(ctx context.Context, key string, cost int, maxDelay time.Duration) (algorithms.Result, error) {
	if err := ratemath.CheckReserve(l.alg, maxDelay); err != nil {
		return algorithms.Result{}, err
	}
	if maxDelay == 0 {
		return l.Allow(ctx, key, cost)
	}
	if err := ratemath.CheckRequest(l.alg, l.limits, key, cost); err != nil {
		return algorithms.Result{}, err
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
	if e := g.evict.distrusted(); e != nil {
		return l.fail(key, cost, e)
	}
	list := "d" + strconv.FormatInt(maxDelay.Microseconds(), 10) + ":" + strconv.Itoa(cost)
	var res []algorithms.Result
	err := g.call(ctx, func(ctx context.Context) error {
		var err error
		res, _, err = l.run(ctx, key, list, true)
		return err
	})
	if err != nil {
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
