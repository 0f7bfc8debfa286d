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
	if l.guard.evict.distrusted() != nil && l.guard.mode == FailLocal {
		return l.chargeTwin(key, int(c)), nil
	}
	list := "o" + strconv.FormatInt(c, 10)
	var res []algorithms.Result
	var id uint64
	err = l.guard.call(ctx, func(ctx context.Context) error {
		var err error
		res, id, err = l.run(ctx, key, list, true)
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
			b.chargeLocked(queueKey{l, key}, int(c), true, doubtOf(err, id, callGroup{}))
			b.mu.Unlock()
		}
		return algorithms.Result{}, fmt.Errorf("redisstore: charge: %w", err)
	}
	return res[0], nil
}

// chargeTwin charges the local twin, which decides while Redis may evict
// (see eviction_watch.go), and owes the charge to Redis as the twin's
// admissions are, so that Redis knows of it should it decide again.
func (l *redisLimiter) chargeTwin(key string, cost int) algorithms.Result {
	b := l.guard.batcher
	b.mu.Lock()
	defer b.mu.Unlock()
	res, err := l.twin.Charge(context.Background(), key, cost)
	b.chargeLocked(queueKey{l, key}, cost, true, callDoubt{})
	if err != nil {
		// Not for a charge ChargeArgs took; were it to happen, the
		// strict side.
		return l.uncounted(false, algorithms.DecidedLocally)
	}
	res.Index = l.twinIndex[res.Index]
	res.Decider = algorithms.DecidedLocally
	return res
}
