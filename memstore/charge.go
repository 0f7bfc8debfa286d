package memstore

import (
	"context"
	"hash/maphash"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// Charge implements RateLimiter, under the shard's lock.
func (l *memoryLimiter) Charge(_ context.Context, key string, cost int) (algorithms.Result, error) {
	c, err := ratemath.ChargeArgs(l.alg, l.limits, key, cost)
	if err != nil {
		return algorithms.Result{}, err
	}
	return l.charge(key, c, true), nil
}

// charge takes up to c units for key under each limit, as the scripts'
// charge does: what a peek of cost 0 finds left, when that is less; or,
// with over, by overdraw where the algorithm can, as the scripts' "o"
// charge does.
func (l *memoryLimiter) charge(key string, c int64, over bool) algorithms.Result {
	s := l.store
	h := maphash.String(s.seed, key)
	sh, tag := &s.shards[h&uint64(len(s.shards)-1)], tagOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now()
	sh.housekeep(now, s.sweepUS)
	b := ratemath.NewBinding()
	for i, spec := range l.specs {
		// Looked up after the previous limit's insert, which may move
		// entries.
		e, j := sh.lookup(spec, l.alg, l.params[i], key, tag, now)
		p := l.params[i]
		v := e.Decide(l.alg, now, p, 0, 0)
		took := false
		if over && ratemath.Overdraws(l.alg) {
			took = e.Overdraw(l.alg, now, p, c)
		} else if take := min(c, v.Remaining); v.OK && take > 0 {
			e.Commit(l.alg, now, p, take)
			took = true
		}
		switch {
		case took && j >= 0:
			sh.table(spec).store(j, &e)
		case took:
			sh.insert(s.seed, spec, l.alg, p, key, tag, &e, now, s.shardCap)
		case j >= 0 && e.Fixed:
			sh.table(spec).store(j, &e)
		}
		b.Add(i, e.Decide(l.alg, now, p, 0, 0))
	}
	return b.ResultIn(l.policies)
}
