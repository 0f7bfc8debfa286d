package algorithms

import (
	"context"
	"fmt"
	"hash/maphash"
	"strconv"
)

// Charger is implemented by the Limiters New returns, on every store: it
// charges a request whose cost is known only after the work (rows
// returned, bytes sent), however large that cost turns out to be.
type Charger interface {
	// Charge takes cost units for key under every limit of the limiter,
	// and is never refused. A limit with cost left takes exactly cost; one
	// with less left takes more than it has where its algorithm can, so
	// that a cost far above the quota lets one request through a period:
	// the fixed window and the sliding window log take all they have left
	// and stay full until those units leave the window; the sliding window
	// counter fills the current window's count up to the quota, so the
	// previous window's fading count frees no room before the next window;
	// the token bucket and the leaky bucket go into debt, down to one unit
	// above minus the burst at most, so that the next request of cost 1
	// waits for a whole burst to refill, never longer (a bucket that a
	// reservation left deeper takes nothing more). It is atomic (one script
	// call on Redis, counted once however often the client sends it) and
	// returns the Result a request of cost 0 would get after it: Remaining
	// 0 when the charge took all that was left, and Allowed false, with
	// RetryAfter until the excess is paid back, when it took more.
	//
	// On Redis, a charge Redis cannot answer is not made there, and the
	// error is returned wrapped; under FailLocal the local twin takes the
	// charge, so that the stand-in that decides while Redis cannot counts
	// it, and Redis is charged later, as local admissions are, only what it
	// has left (see the charge line, redis_charges.go).
	Charge(ctx context.Context, key string, cost int) (Result, error)
}

// chargeArgs checks a charge's arguments and returns cost clamped to twice
// the limits' largest quota: no limit can take more (a full bucket goes
// into a debt of its burst less one unit at most).
func chargeArgs(alg Algorithm, limits []Limit, key string, cost int) (int64, error) {
	if err := checkRequest(alg, limits, key, 1); err != nil {
		return 0, err
	}
	if cost < 1 {
		return 0, fmt.Errorf("%w: charge of %d", ErrInvalidCost, cost)
	}
	most := int64(0)
	for _, l := range limits {
		most = max(most, int64(quota(alg, l)))
	}
	return min(int64(cost), 2*most), nil
}

// Charge implements Charger, under the shard's lock.
func (l *memoryLimiter) Charge(_ context.Context, key string, cost int) (Result, error) {
	c, err := chargeArgs(l.alg, l.limits, key, cost)
	if err != nil {
		return Result{}, err
	}
	return l.charge(key, c, true), nil
}

// charge takes up to c units for key under each limit, as the scripts'
// charge does: what a peek of cost 0 finds left, when that is less; or,
// with over, by overdraw where the algorithm can, as the scripts' "o"
// charge does.
func (l *memoryLimiter) charge(key string, c int64, over bool) Result {
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
		took := false
		if over && overdraws(l.alg) {
			took = e.overdraw(l.alg, now, p, c)
		} else if take := min(c, v.remaining); v.ok && take > 0 {
			e.commit(l.alg, now, p, take)
			took = true
		}
		switch {
		case took && j >= 0:
			sh.table(spec).store(j, &e)
		case took:
			sh.insert(s.seed, spec, l.alg, p, key, tag, &e, now, s.shardCap)
		case j >= 0 && e.fixed:
			sh.table(spec).store(j, &e)
		}
		b.add(i, e.decide(l.alg, now, p, 0, 0))
	}
	return b.result(l.alg, l.limits)
}

// Charge implements Charger: one script call, outside the batches, that
// carries an id like a deciding call, so that it counts once. A denial the
// store remembers for key stays: a charge only takes room away.
func (l *redisLimiter) Charge(ctx context.Context, key string, cost int) (Result, error) {
	c, err := chargeArgs(l.alg, l.limits, key, cost)
	if err != nil {
		return Result{}, err
	}
	list := "o" + strconv.FormatInt(c, 10)
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
			l.twin.charge(key, tc, true)
			b.chargeLocked(queueKey{l, key}, int(c), true, doubtOf(err, id))
			b.mu.Unlock()
		}
		return Result{}, fmt.Errorf("algorithms: redis charge: %w", err)
	}
	return res[0], nil
}

// overdraws reports whether alg can take a charge past what it has left.
func overdraws(alg Algorithm) bool {
	return alg == SlidingWindowCounter || alg == TokenBucket || alg == LeakyBucket
}

// overdraw charges c units to an entry that decide has just brought up to
// now (µs) for a cost of 0, past what it has left, as the scripts'
// overdraw: the sliding window counter fills its current count up to the
// rate; the token bucket's level falls by c tokens, but not below one
// token above minus the burst; the leaky bucket's backlog grows by c units,
// but not past twice the capacity less one unit, the excess kept as a
// reservation's. The comparisons divide, so that no product overflows.
// It reports whether it changed the entry.
func (e *entry) overdraw(alg Algorithm, nowUS int64, p params, c int64) bool {
	switch alg {
	case SlidingWindowCounter:
		n := min(c, p.rate-e.b)
		if n <= 0 {
			return false
		}
		e.b += n
		return true
	case TokenBucket:
		low := (1 - p.burst) * p.period
		if e.a <= low {
			return false
		}
		if c > (e.a-low)/p.period {
			e.a = low
		} else {
			e.a -= c * p.period
		}
		return true
	case LeakyBucket:
		now := floorDiv(nowUS, p.unit)
		capacity := p.burst * p.period
		high := 2*capacity - p.period
		after := (e.a-now)*p.rate + e.b
		if after >= high {
			return false
		}
		if c > (high-after)/p.period {
			after = high
		} else {
			after += c * p.period
		}
		e.a, e.b, e.c = now+after/p.rate, after%p.rate, max(after-capacity, 0)
		return true
	}
	return false
}
