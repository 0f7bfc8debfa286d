// Package memstore is the in-process algorithms.Store: rate limits and
// concurrency limits in this process's memory, in shards with a bounded
// index and eviction. It suits a single instance and tests (WithClock), and
// is the Redis store's stand-in while Redis cannot decide.
package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"sync"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// shardCount is a power of two, so a hash picks a shard with a mask; it is
// the number of shards of the concurrency leases and the least of the
// rate-limit state.
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

// Store keeps rate-limit state in process memory. It is safe for
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
type Store struct {
	cfg      config
	err      error
	seed     maphash.Seed
	shards   []memoryShard
	shardCap int // entries one shard holds at most

	mu    sync.Mutex
	specs map[string]uint32 // algorithm and limit -> the id entries are filed under
	conc  *concurrencyState // the leases of every concurrency limit, whatever its maximum (concurrency_memory.go)
}

// New returns a store that keeps state in process memory. An invalid option
// makes the store's NewLimiter and NewConcurrency return its error.
func New(opts ...Option) *Store {
	cfg, err := newConfig(opts)
	n := minShards
	for n < maxShards && cfg.maxKeys/n > shardTarget {
		n *= 2
	}
	return &Store{
		cfg: cfg, err: err, seed: maphash.MakeSeed(), specs: map[string]uint32{},
		// Positions in a table are 32-bit.
		shards: make([]memoryShard, n), shardCap: min(cfg.maxKeys/n, math.MaxInt32),
	}
}

// Len reports how many entries the store holds, expired or not, for tests
// and metrics.
func (s *Store) Len() int {
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
func (s *Store) NewLimiter(alg algorithms.Algorithm, limits []algorithms.Limit) (algorithms.RateLimiter, error) {
	if s == nil || s.shards == nil {
		return nil, fmt.Errorf("%w: a memory store must come from New", algorithms.ErrInvalidOption)
	}
	if s.err != nil {
		return nil, s.err
	}
	l := &memoryLimiter{store: s, alg: alg, limits: limits}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, lim := range limits {
		name := ratemath.StateName(alg, lim)
		id, ok := s.specs[name]
		if !ok {
			id = uint32(len(s.specs))
			s.specs[name] = id
		}
		l.specs = append(l.specs, id)
		l.params = append(l.params, ratemath.ParamsFor(alg, lim))
	}
	return l, nil
}

type memoryLimiter struct {
	store  *Store
	alg    algorithms.Algorithm
	limits []algorithms.Limit
	specs  []uint32
	params []ratemath.Params
}

// Allow implements Limiter. It fails only for invalid requests. It never
// waits, so it does not consult ctx: a decision in memory is as cheap as
// asking whether the context is done.
func (l *memoryLimiter) Allow(_ context.Context, key string, cost int) (algorithms.Result, error) {
	if err := ratemath.CheckRequest(l.alg, l.limits, key, cost); err != nil {
		return algorithms.Result{}, err
	}
	return l.decide(key, cost, 0), nil
}

// decide decides a valid request under the shard's lock, admitting it
// within maxDelay µs (0: now or not at all).
func (l *memoryLimiter) decide(key string, cost int, maxDelay int64) algorithms.Result {
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
	var nextBuf [4]ratemath.Entry
	at, next := atBuf[:0], nextBuf[:0]
	b := ratemath.NewBinding()
	for i, spec := range l.specs {
		e, j := sh.lookup(spec, key, tag)
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
	return b.Result(l.alg, l.limits)
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

// Policies implements RateLimiter.
func (l *memoryLimiter) Policies() []algorithms.Policy { return ratemath.PoliciesOf(l.alg, l.limits) }
