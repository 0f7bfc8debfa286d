package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// Charge implements RateLimiter: one script call, outside the batches, that
// carries an id like a deciding call, so that it counts once. A denial the
// store remembers for key stays: a charge only takes room away.
func (l *redisLimiter) Charge(ctx context.Context, key string, cost int) (algorithms.Result, error) {
	c, err := ratemath.ChargeArgs(l.alg, l.limits, key, cost)
	if err != nil {
		return algorithms.Result{}, err
	}
	list := "o" + strconv.FormatInt(c, 10)
	var res []algorithms.Result
	var id uint64
	err = l.within(ctx, func(ctx context.Context) error {
		var err error
		res, id, err = l.runInto(ctx, key, list, 1, true, nil)
		return err
	})
	if err != nil {
		if l.guard.mode == FailLocal {
			// The twin decides while Redis cannot: it must count what
			// Redis did not take (its quotas may be shares, so clamp);
			// and the charge is owed to Redis unless its call ran.
			b := l.guard.batcher
			b.mu.Lock()
			_, _ = l.twin.Charge(context.Background(), key, int(c))
			b.chargeLocked(queueKey{l, key}, int(c), true, doubtOf(err, id))
			b.mu.Unlock()
		}
		return algorithms.Result{}, fmt.Errorf("redisstore: charge: %w", err)
	}
	return res[0], nil
}
