package algorithms

import (
	"context"
	"fmt"
	"hash/maphash"
	"strconv"
)

// chargeArgs checks a charge's arguments and returns cost clamped to the
// limits' largest quota: no limit can take more.
func chargeArgs(alg Algorithm, limits []Limit, key string, cost int) (int64, error) {
	if err := checkRequest(alg, limits, key, 1); err != nil {
		return 0, err
	}
	if cost < 1 {
		return 0, fmt.Errorf("%w: charge of %d", ErrInvalidCost, cost)
	}
	most := 0
	for _, l := range limits {
		most = max(most, quota(alg, l))
	}
	return int64(min(cost, most)), nil
}

// Charge implements RateLimiter, under the shard's lock.
func (l *memoryLimiter) Charge(_ context.Context, key string, cost int) (Result, error) {
	c, err := chargeArgs(l.alg, l.limits, key, cost)
	if err != nil {
		return Result{}, err
	}
	return l.charge(key, c), nil
}

// charge takes up to c units for key under each limit, as the scripts'
// charge does: what a peek of cost 0 finds left, when that is less.
func (l *memoryLimiter) charge(key string, c int64) Result {
	s := l.store
	h := maphash.String(s.seed, key)
	sh, tag := &s.shards[h&uint64(len(s.shards)-1)], tagOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.cfg.clock().UnixMicro()
	sh.housekeep(now, s.cfg.sweep.Microseconds())
	b := newBinding()
	for i, spec := range l.specs {
		// Looked up after the previous limit's insert, which may move
		// entries.
		e, j := sh.lookup(spec, key, tag)
		p := l.params[i]
		v := e.decide(l.alg, now, p, 0, 0)
		switch take := min(c, v.remaining); {
		case v.ok && take > 0 && j >= 0:
			e.commit(l.alg, now, p, take)
			sh.table(spec).store(j, &e)
		case v.ok && take > 0:
			e.commit(l.alg, now, p, take)
			sh.insert(s.seed, spec, l.alg, p, key, tag, &e, now, s.shardCap)
		case j >= 0 && e.fixed:
			sh.table(spec).store(j, &e)
		}
		b.add(i, e.decide(l.alg, now, p, 0, 0))
	}
	return b.result(l.alg, l.limits)
}

// Charge implements RateLimiter: one script call, outside the batches, that
// carries an id like a deciding call, so that it counts once. A denial the
// store remembers for key stays: a charge only takes room away.
func (l *redisLimiter) Charge(ctx context.Context, key string, cost int) (Result, error) {
	c, err := chargeArgs(l.alg, l.limits, key, cost)
	if err != nil {
		return Result{}, err
	}
	list := "c" + strconv.FormatInt(c, 10)
	var res []Result
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
			tc, _ := chargeArgs(l.alg, l.twin.limits, key, int(c))
			l.twin.charge(key, tc)
			b.chargeLocked(queueKey{l, key}, int(c), true, doubtOf(err, id))
			b.mu.Unlock()
		}
		return Result{}, fmt.Errorf("algorithms: redis charge: %w", err)
	}
	return res[0], nil
}
