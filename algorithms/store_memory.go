package algorithms

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
)

// shardCount is a power of two, so a hash picks a shard with a mask; it is
// the number of shards of the denial cache and the least of the memory
// store.
const shardCount = 64

// Shards: at least minShards, more for a larger bound so that no shard holds
// more than shardTarget entries (up to maxShards). Work proportional to a
// shard, rebuilding its maps to return memory, then stays well under a
// millisecond.
const (
	minShards   = shardCount
	maxShards   = 4096
	shardTarget = 16384
)

// MemoryStore keeps rate-limit state in process memory. It is safe for
// concurrent use. It suits a single instance, tests, and a fallback for when
// Redis is unreachable.
//
// State is spread over shards, each with its own lock. An entry (one key
// under one limit) takes about 70 bytes with a key of up to 16 bytes (80 for
// the sliding window counter): the key, two or three integers and its slot
// in an index, with no pointer of its own. The sliding window log also keeps
// its times, 8 bytes each.
//
// The store holds at most about DefaultMaxKeys entries, or the bound given
// by WithMaxKeys, split evenly over the shards. A shard that is full and must
// add an entry first drops expired ones; if none is, it samples a few of its
// entries and forgets the one nearest to a fresh state: the least used share
// of its quota, weighted by the time left until it would be fresh anyway. A
// forgotten key starts afresh, so an attacker who forces evictions by
// flooding new keys gains at most one quota for a key it manages to have
// forgotten, and the entries forgotten first are those where that gain is
// smallest; a well-used key is forgotten only when every entry sampled is
// used as much.
//
// Expired entries are dropped by passes over each shard (see
// WithSweepInterval) that examine a few entries per request, so no request
// waits for a whole shard. A shard's maps are rebuilt when a pass finds them
// at a quarter of their peak, so memory returns after a flood of keys goes
// quiet, and a limit with no entries left in a shard leaves nothing there.
// Housekeeping happens on requests: a shard that serves none keeps what it
// holds.
type MemoryStore struct {
	cfg      storeConfig
	err      error
	seed     maphash.Seed
	shards   []memoryShard
	shardCap int // entries one shard holds at most

	mu    sync.Mutex
	specs map[string]uint32 // algorithm and limit -> the id entries are filed under
	conc  *concurrencyState // the leases of every concurrency limit, whatever its maximum (concurrency_memory.go)
}

// NewMemoryStore returns a store that keeps state in process memory. Options
// it cannot use make New return their error.
func NewMemoryStore(opts ...StoreOption) Store {
	cfg, err := newStoreConfig(opts)
	n := minShards
	for n < maxShards && cfg.maxKeys/n > shardTarget {
		n *= 2
	}
	return &MemoryStore{
		cfg: cfg, err: err, seed: maphash.MakeSeed(), specs: map[string]uint32{},
		// Positions in a table are 32-bit.
		shards: make([]memoryShard, n), shardCap: min(cfg.maxKeys/n, math.MaxInt32),
	}
}

// Len reports how many entries the store holds, expired or not, for tests
// and metrics.
func (s *MemoryStore) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.count
		sh.mu.Unlock()
	}
	return n
}

// NewLimiter implements Store.
func (s *MemoryStore) NewLimiter(alg Algorithm, limits []Limit) (RateLimiter, error) {
	if s == nil || s.shards == nil {
		return nil, fmt.Errorf("%w: a memory store must come from NewMemoryStore", ErrInvalidOption)
	}
	if s.err != nil {
		return nil, s.err
	}
	l := &memoryLimiter{store: s, alg: alg, limits: limits}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, lim := range limits {
		name := stateName(alg, lim)
		id, ok := s.specs[name]
		if !ok {
			id = uint32(len(s.specs))
			s.specs[name] = id
		}
		l.specs = append(l.specs, id)
		l.params = append(l.params, paramsFor(alg, lim))
	}
	return l, nil
}

type memoryLimiter struct {
	store  *MemoryStore
	alg    Algorithm
	limits []Limit
	specs  []uint32
	params []params
}

// Allow implements Limiter. It fails only for invalid requests. It never
// waits, so it does not consult ctx: a decision in memory is as cheap as
// asking whether the context is done.
func (l *memoryLimiter) Allow(_ context.Context, key string, cost int) (Result, error) {
	if err := checkRequest(l.alg, l.limits, key, cost); err != nil {
		return Result{}, err
	}
	return l.decide(key, cost, 0), nil
}

// decide decides a valid request under the shard's lock, admitting it
// within maxDelay µs (0: now or not at all).
func (l *memoryLimiter) decide(key string, cost int, maxDelay int64) Result {
	s := l.store
	h := maphash.String(s.seed, key)
	sh, tag := &s.shards[h&uint64(len(s.shards)-1)], tagOf(h)
	c := int64(cost)

	sh.mu.Lock()
	defer sh.mu.Unlock()
	// The time is read under the lock: a request that waited for it must not
	// decide with the time it arrived, before the requests that went first.
	now := s.cfg.clock().UnixMicro()
	// Housekeeping moves entries, so it runs before any is looked up.
	sh.housekeep(now, s.cfg.sweep.Microseconds())

	// Most limiters have one or two limits; the arrays keep them off the heap.
	var atBuf [4]int
	var nextBuf [4]entry
	at, next := atBuf[:0], nextBuf[:0]
	b := newBinding()
	for i, spec := range l.specs {
		e, j := sh.lookup(spec, key, tag)
		v, n := e.reserve(l.alg, now, l.params[i], c, maxDelay)
		b.add(i, v)
		at, next = append(at, j), append(next, n)
	}
	if b.allowed {
		// Stored entries first: adding one may evict others and move them.
		for i, j := range at {
			if j >= 0 {
				next[i].commit(l.alg, now, l.params[i], c)
				sh.table(l.specs[i]).store(j, &next[i])
			}
		}
		for i, j := range at {
			if j < 0 {
				next[i].commit(l.alg, now, l.params[i], c)
				sh.insert(s.seed, l.specs[i], l.alg, l.params[i], key, tag, &next[i], now, s.shardCap)
			}
		}
	} else {
		storeFixed(sh, l.specs, at, next)
	}
	return b.result(l.alg, l.limits)
}

// storeFixed stores the entries that decide corrected without consuming
// from them, as the scripts write such a correction on a deny or a peek.
func storeFixed(sh *memoryShard, specs []uint32, at []int, next []entry) {
	for i, j := range at {
		if j >= 0 && next[i].fixed {
			sh.table(specs[i]).store(j, &next[i])
		}
	}
}

// Policies implements RateLimiter.
func (l *memoryLimiter) Policies() []Policy { return policies(l.alg, l.limits) }
