package algorithms

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"time"
)

// ErrInvalidAge is returned (wrapped) by Refund for a negative age.
var ErrInvalidAge = errors.New("algorithms: refund age must not be negative")

// maxRefundAge bounds the age a refund carries: longer than any period a
// limit may have (see Limit.Validate), so a longer one means the same.
const maxRefundAge = 400 * 24 * time.Hour

// refundArgs checks a refund's arguments and returns cost, clamped to the
// limits' largest quota, and age in µs, clamped to maxRefundAge.
func refundArgs(alg Algorithm, limits []Limit, key string, cost int, age time.Duration) (int64, int64, error) {
	if err := checkRequest(alg, limits, key, 1); err != nil {
		return 0, 0, err
	}
	if cost < 1 {
		return 0, 0, fmt.Errorf("%w: refund of %d", ErrInvalidCost, cost)
	}
	if age < 0 {
		return 0, 0, fmt.Errorf("%w: %v", ErrInvalidAge, age)
	}
	most := 0
	for _, l := range limits {
		most = max(most, quota(alg, l))
	}
	return int64(min(cost, most)), min(age, maxRefundAge).Microseconds(), nil
}

// Refund implements RateLimiter, under the shard's lock.
func (l *memoryLimiter) Refund(_ context.Context, key string, cost int, age time.Duration) (Result, error) {
	c, ageUS, err := refundArgs(l.alg, l.limits, key, cost, age)
	if err != nil {
		return Result{}, err
	}
	s := l.store
	h := maphash.String(s.seed, key)
	sh, tag := &s.shards[h&uint64(len(s.shards)-1)], tagOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.cfg.clock().UnixMicro()
	b := newBinding()
	for i, spec := range l.specs {
		e, j := sh.lookup(spec, key, tag)
		p := l.params[i]
		e.decide(l.alg, now, p, 0, 0)
		// No stored state has nothing to give back.
		if j >= 0 && (e.refund(l.alg, now, p, c, now-ageUS) || e.fixed) {
			if t := sh.table(spec); e.drained(l.alg, now, p) {
				sh.remove(t, j) // as the scripts delete a state that means none
			} else {
				t.store(j, &e)
			}
		}
		b.add(i, e.decide(l.alg, now, p, 0, 0))
	}
	return b.result(l.alg, l.limits), nil
}

// refund gives back up to cost units consumed no later than sinceUS from an
// entry decide has just brought up to nowUS, as the scripts' refund
// functions do, and reports whether it changed the entry.
func (e *entry) refund(alg Algorithm, nowUS int64, p params, cost, sinceUS int64) bool {
	now, since := floorDiv(nowUS, p.unit), floorDiv(sinceUS, p.unit)
	switch alg {
	case FixedWindow:
		if e.b == 0 || e.a-p.period > since {
			return false
		}
		e.b = max(e.b-cost, 0)
	case SlidingWindowCounter:
		if e.b == 0 || e.a > since {
			return false
		}
		e.b = max(e.b-cost, 0)
	case SlidingWindowLog:
		// decide has dropped the times that left the window.
		if since <= now-p.period || e.log.n == 0 {
			return false
		}
		e.log.n -= int(min(cost, int64(e.log.n)))
	case TokenBucket:
		capacity := p.burst * p.period
		if e.a >= capacity {
			return false
		}
		e.a, e.b = min(e.a+cost*p.period, capacity), now
	case LeakyBucket:
		backlog := (e.a-now)*p.rate + e.b
		if backlog == 0 {
			return false
		}
		after := max(backlog-cost*p.period, 0)
		// What stays past the capacity is still reserved (see decide).
		e.a, e.b, e.c = now+after/p.rate, after%p.rate, max(after-p.burst*p.period, 0)
	default:
		return false
	}
	return true
}

// drained reports whether a refund left e meaning no state, which the
// scripts then delete: an empty log (which has no expiry), a full bucket,
// a TAT of now.
func (e *entry) drained(alg Algorithm, nowUS int64, p params) bool {
	switch alg {
	case SlidingWindowLog:
		return e.log.n == 0
	case TokenBucket:
		return e.a >= p.burst*p.period
	case LeakyBucket:
		return e.a == floorDiv(nowUS, p.unit) && e.b == 0
	}
	return false
}

// Refund implements RateLimiter: one script call, outside the batches, that
// carries an id like a deciding call, so that it counts once. The denials
// this store remembers for key are forgotten at once, since the refund may
// have made room; a refund that gave something back is announced to the
// other stores by the script (see DenialCacheBound).
func (l *redisLimiter) Refund(ctx context.Context, key string, cost int, age time.Duration) (Result, error) {
	c, ageUS, err := refundArgs(l.alg, l.limits, key, cost, age)
	if err != nil {
		return Result{}, err
	}
	list := "r" + strconv.FormatInt(c, 10) + "/" + strconv.FormatInt(ageUS, 10)
	var res []Result
	err = l.within(ctx, func(ctx context.Context) error {
		var err error
		res, err = l.run(ctx, key, list, 1, true)
		return err
	})
	if err != nil {
		return Result{}, fmt.Errorf("algorithms: redis refund: %w", err)
	}
	l.guard.denials.forget(key)
	return res[0], nil
}
