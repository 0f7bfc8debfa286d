package memstore

import (
	"context"
	"hash/maphash"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// Refund implements RateLimiter, under the shard's lock.
func (l *memoryLimiter) Refund(_ context.Context, key string, cost int, age time.Duration) (algorithms.Result, error) {
	c, ageUS, err := ratemath.RefundArgs(l.alg, l.limits, key, cost, age)
	if err != nil {
		return algorithms.Result{}, err
	}
	s := l.store
	h := maphash.String(s.seed, key)
	sh, tag := &s.shards[h&uint64(len(s.shards)-1)], tagOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now()
	b := ratemath.NewBinding()
	for i, spec := range l.specs {
		e, j := sh.lookup(spec, l.alg, l.params[i], key, tag, now)
		p := l.params[i]
		e.Decide(l.alg, now, p, 0, 0)
		// No stored state has nothing to give back.
		if j >= 0 && (e.Refund(l.alg, now, p, c, now-ageUS) || e.Fixed) {
			if t := sh.table(spec); e.Drained(l.alg, now, p) {
				sh.remove(t, j) // as the scripts delete a state that means none
			} else {
				t.store(j, &e)
			}
		}
		b.Add(i, e.Decide(l.alg, now, p, 0, 0))
	}
	return b.ResultIn(l.policies), nil
}
