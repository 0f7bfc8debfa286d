package memstore

import (
	"context"
	"hash/maphash"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// Allow implements Limiter. It fails only for invalid requests. It never
// waits, so it does not consult ctx: a decision in memory is as cheap as
// asking whether the context is done.
func (l *memoryLimiter) Allow(_ context.Context, key string, cost int) (algorithms.Result, error) {
	// The checks CheckRequest makes, without its loop; it says what failed.
	if key == "" || len(key) > algorithms.MaxKeyLength || cost < 1 || cost > l.leastQuota {
		return algorithms.Result{}, ratemath.CheckRequest(l.alg, l.limits, key, cost)
	}
	if len(l.specs) > 1 {
		return l.decide(key, cost, 0), nil
	}
	s := l.store
	h := maphash.String(s.seed, key)
	ok, remaining, retry, reset := l.decideOne(&s.shards[h&uint64(len(s.shards)-1)], key, tagOf(h), int64(cost), 0)
	return ratemath.PolicyResult(l.policies[0], 0, ok, remaining, retry, reset), nil
}

// decide decides a valid request under the lock of key's shard, admitting
// it within maxDelay µs (0: now or not at all). The time is read under the
// lock: a request that waited for it must not decide with the time it
// arrived, before the requests that went first (TestMemoryReadsClockUnderLock,
// TestMemoryTimeFollowsDecisionOrder).
func (l *memoryLimiter) decide(key string, cost int, maxDelay int64) algorithms.Result {
	s := l.store
	h := maphash.String(s.seed, key)
	sh, tag := &s.shards[h&uint64(len(s.shards)-1)], tagOf(h)
	if len(l.specs) == 1 {
		ok, remaining, retry, reset := l.decideOne(sh, key, tag, int64(cost), maxDelay)
		return ratemath.PolicyResult(l.policies[0], 0, ok, remaining, retry, reset)
	}
	c := int64(cost)

	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now()
	// Housekeeping moves entries, so it runs before any is looked up.
	sh.housekeep(now, s.sweepUS)

	// Most limiters have one or two limits; the arrays keep them off the heap.
	var atBuf [4]int
	var nextBuf [4]ratemath.Entry
	at, next := atBuf[:0], nextBuf[:0]
	b := ratemath.NewBinding()
	for i, spec := range l.specs {
		e, j := sh.lookup(spec, l.alg, l.params[i], key, tag, now)
		v, n := e.Reserve(l.alg, now, l.params[i], c, maxDelay)
		b.Add(i, v)
		at, next = append(at, j), append(next, n)
	}
	if b.Allowed {
		// Stored entries first: adding one may evict others and move them.
		for i, j := range at {
			if j >= 0 {
				next[i].Commit(l.alg, now, l.params[i], c)
				sh.table(l.specs[i]).store(j, &next[i])
			}
		}
		for i, j := range at {
			if j < 0 {
				next[i].Commit(l.alg, now, l.params[i], c)
				sh.insert(s.seed, l.specs[i], l.alg, l.params[i], key, tag, &next[i], now, s.shardCap)
			}
		}
	} else {
		storeFixed(sh, l.specs, at, next)
	}
	return b.ResultIn(l.policies)
}

// decideOne is decide for a limiter of one limit, the common case: the
// entry is decided in place, with no binding to choose among limits, and
// the caller makes the Result, after the lock is released, from what it
// returns: whether the request is admitted, what remains, the delay of an
// admission or the retry of a denial, and the reset, durations in µs.
func (l *memoryLimiter) decideOne(sh *memoryShard, key string, tag uint32, c, maxDelay int64) (ok bool, remaining, retry, reset int64) {
	s, p := l.store, l.params[0]
	sh.mu.Lock()
	now := s.now()
	sh.housekeep(now, s.sweepUS)
	var e ratemath.Entry
	t, j := sh.table(l.specs[0]), -1
	if t != nil && t.index.n > 0 {
		if i, found := t.index.find(tag, key, t.ents); found {
			j = int(uint32(t.index.slots[i])) - 1
			e = t.load(j)
		}
	}
	if j < 0 && sh.forgot.marks != nil {
		sh.forgot.start(&e, tag, l.specs[0], l.alg, p, now)
	}
	v := e.Decide(l.alg, now, p, c, maxDelay)
	switch {
	case v.OK:
		e.Commit(l.alg, now, p, c)
		if j >= 0 {
			t.store(j, &e)
		} else {
			sh.insert(s.seed, l.specs[0], l.alg, p, key, tag, &e, now, s.shardCap)
		}
	case j >= 0 && e.Fixed:
		t.store(j, &e)
	}
	sh.mu.Unlock()
	if v.OK {
		return true, v.Remaining, v.Wait, v.Reset
	}
	return false, v.Remaining, v.Retry, v.Reset
}

// storeFixed stores the entries that decide corrected without consuming
// from them, as the scripts write such a correction on a deny or a peek.
func storeFixed(sh *memoryShard, specs []uint32, at []int, next []ratemath.Entry) {
	for i, j := range at {
		if j >= 0 && next[i].Fixed {
			sh.table(specs[i]).store(j, &next[i])
		}
	}
}

// DecisionTimeout implements algorithms.DecisionBounder: a decision in
// memory never waits, so a caller needs no deadline of its own for it (the
// middleware then makes no context per request).
func (l *memoryLimiter) DecisionTimeout() time.Duration { return 0 }
