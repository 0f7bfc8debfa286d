package algorithms

import (
	"hash/maphash"
	"sync"
	"time"
)

// denials remembers the denials Redis issued, so that a flood on one key is
// answered in this process until the denial's RetryAfter has passed instead
// of costing Redis a script call per request.
//
// A remembered denial for cost c answers only requests of cost c or more:
// those cannot pass before c could, since room only grows with time and
// other requests only take it away. And it ends at the time the request was
// sent plus RetryAfter, which is no later than Redis's own moment to admit
// it, so the cache never denies what Redis would admit.
//
// Memory is bounded: each shard holds at most its share of the size, and a
// full shard drops expired entries first, else an arbitrary one (forgetting
// a denial only means asking Redis again).
type denials struct {
	seed     maphash.Seed
	perShard int
	shards   [shardCount]denialShard
}

type denialShard struct {
	mu sync.Mutex
	m  map[denialKey]denial
}

type denialKey struct {
	l   *redisLimiter
	key string
}

type denial struct {
	cost  int
	at    time.Time // when the denied request was sent
	until time.Time // at + RetryAfter
	res   Result
}

// newDenials returns a cache of at most size entries, or nil for size 0.
func newDenials(size int) *denials {
	if size == 0 {
		return nil
	}
	return &denials{seed: maphash.MakeSeed(), perShard: max(1, size/shardCount)}
}

func (d *denials) shard(key string) *denialShard {
	return &d.shards[maphash.String(d.seed, key)&(shardCount-1)]
}

// lookup returns the remembered denial for a request of cost on key at now,
// brought up to now, if there is one that covers it.
func (d *denials) lookup(l *redisLimiter, key string, cost int, now time.Time) (Result, bool) {
	if d == nil {
		return Result{}, false
	}
	sh := d.shard(key)
	k := denialKey{l, key}
	sh.mu.Lock()
	e, ok := sh.m[k]
	if ok && !now.Before(e.until) {
		delete(sh.m, k)
		ok = false
	}
	sh.mu.Unlock()
	if !ok || cost < e.cost {
		return Result{}, false
	}
	res := e.res
	res.RetryAfter = e.until.Sub(now)
	res.ResetAfter = max(res.ResetAfter-now.Sub(e.at), res.RetryAfter)
	res.Decider = DecidedByCache
	return res, true
}

// remember stores Redis's denial of a request of cost on key sent at.
func (d *denials) remember(l *redisLimiter, key string, cost int, at time.Time, res Result) {
	if d == nil || res.Allowed || res.RetryAfter <= 0 {
		return
	}
	sh := d.shard(key)
	k := denialKey{l, key}
	e := denial{cost: cost, at: at, until: at.Add(res.RetryAfter), res: res}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m == nil {
		sh.m = make(map[denialKey]denial)
	}
	if old, ok := sh.m[k]; ok {
		// Keep whichever covers more: the smaller cost, else the later end.
		if old.until.After(at) && (old.cost < cost || old.cost == cost && old.until.After(e.until)) {
			return
		}
	} else if len(sh.m) >= d.perShard {
		sh.evict(at)
	}
	sh.m[k] = e
}

// evict makes room for one entry: expired entries go first, among the few
// looked at; otherwise the first one map iteration offers, which Go picks
// at random. The caller holds sh.mu.
func (sh *denialShard) evict(now time.Time) {
	const look = 8
	var victim denialKey
	n := 0
	for k, e := range sh.m {
		if !now.Before(e.until) {
			delete(sh.m, k)
			return
		}
		if n == 0 {
			victim = k
		}
		if n++; n == look {
			break
		}
	}
	delete(sh.m, victim)
}

// forget drops the remembered denial of key, if any.
func (d *denials) forget(l *redisLimiter, key string) {
	if d == nil {
		return
	}
	sh := d.shard(key)
	sh.mu.Lock()
	delete(sh.m, denialKey{l, key})
	sh.mu.Unlock()
}
