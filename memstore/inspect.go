package memstore

import (
	"context"
	"hash/maphash"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// Peek implements RateLimiter: the Result a request of cost 1 would get now,
// under the shard's lock, with nothing consumed (a time left by a clock
// that stepped back is corrected, as by the scripts).
func (l *memoryLimiter) Peek(_ context.Context, key string) (algorithms.Result, error) {
	if err := ratemath.CheckRequest(l.alg, l.limits, key, 1); err != nil {
		return algorithms.Result{}, err
	}
	s := l.store
	h := maphash.String(s.seed, key)
	sh, tag := &s.shards[h&uint64(len(s.shards)-1)], tagOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now()
	b := ratemath.NewBinding()
	var atBuf [4]int
	var nextBuf [4]ratemath.Entry
	at, next := atBuf[:0], nextBuf[:0]
	for i, spec := range l.specs {
		e, j := sh.lookup(spec, l.alg, l.params[i], key, tag, now)
		v, n := e.Check(l.alg, now, l.params[i], 1)
		b.Add(i, v)
		at, next = append(at, j), append(next, n)
	}
	storeFixed(sh, l.specs, at, next)
	return b.ResultIn(l.policies), nil
}

// Reset implements RateLimiter: key's entries under every limit are dropped.
func (l *memoryLimiter) Reset(_ context.Context, key string) error {
	if err := ratemath.CheckRequest(l.alg, l.limits, key, 1); err != nil {
		return err
	}
	s := l.store
	h := maphash.String(s.seed, key)
	sh, tag := &s.shards[h&uint64(len(s.shards)-1)], tagOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, spec := range l.specs {
		if t := sh.table(spec); t != nil {
			if j := t.index.lookup(tag, key, t.ents); j >= 0 {
				sh.remove(t, j)
			}
		}
	}
	return nil
}
