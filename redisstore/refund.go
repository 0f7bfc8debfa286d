package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// Refund implements RateLimiter: one script call, outside the batches, that
// carries an id like a deciding call, so that it counts once. The denials
// this store remembers for key are forgotten at once, since the refund may
// have made room; a refund that gave something back is announced to the
// other stores by the script (see denialCacheBound).
func (l *redisLimiter) Refund(ctx context.Context, key string, cost int, age time.Duration) (algorithms.Result, error) {
	c, ageUS, err := ratemath.RefundArgs(l.alg, l.limits, key, cost, age)
	if err != nil {
		return algorithms.Result{}, err
	}
	list := "r" + strconv.FormatInt(c, 10) + "/" + strconv.FormatInt(ageUS, 10)
	var res []algorithms.Result
	err = l.guard.call(ctx, func(ctx context.Context) error {
		var err error
		res, _, err = l.run(ctx, key, list, true)
		return err
	})
	if err != nil {
		return algorithms.Result{}, fmt.Errorf("redisstore: refund: %w", err)
	}
	l.guard.denials.forget(key)
	return res[0], nil
}
