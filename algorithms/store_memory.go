package algorithms

import (
	"context"
	"hash/maphash"
	"sync"
)

// shardCount is a power of two, so a hash picks a shard with a mask.
const shardCount = 64

// MemoryStore keeps rate-limit state in process memory. It is safe for
// concurrent use; state is spread over shards, each with its own lock, and
// the state of keys that went quiet is dropped by periodic sweeps. It suits
// a single instance, tests, and a fallback for when Redis is unreachable.
type MemoryStore struct {
	cfg    storeConfig
	err    error
	seed   maphash.Seed
	shards [shardCount]memoryShard

	mu    sync.Mutex
	specs map[string]uint32 // algorithm and limit -> the id entries are filed under
}

type memoryShard struct {
	mu        sync.Mutex
	entries   []map[string]*entry // by limit id, then by the caller's key
	nextSweep int64               // µs
	_         [24]byte            // pads the shard to 64 bytes: one cache line, no false sharing
}

// NewMemoryStore returns a store that keeps state in process memory. Options
// it cannot use make New return their error.
func NewMemoryStore(opts ...StoreOption) Store {
	cfg, err := newStoreConfig(opts)
	s := &MemoryStore{cfg: cfg, err: err, seed: maphash.MakeSeed(), specs: map[string]uint32{}}
	return s
}

// Len reports how many entries the store holds, expired or not, for tests
// and metrics.
func (s *MemoryStore) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, m := range sh.entries {
			n += len(m)
		}
		sh.mu.Unlock()
	}
	return n
}

func (s *MemoryStore) newLimiter(alg Algorithm, limits []Limit) (Limiter, error) {
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
		l.params = append(l.params, paramsOf(lim))
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
	s := l.store
	now := s.cfg.clock().UnixMicro()
	sh := &s.shards[maphash.String(s.seed, key)&(shardCount-1)]
	c := int64(cost)

	sh.mu.Lock()
	defer sh.mu.Unlock()
	if now >= sh.nextSweep {
		sh.sweep(now)
		sh.nextSweep = now + s.cfg.sweep.Microseconds()
	}
	// Most limiters have one or two limits; the arrays keep them off the heap.
	var storedBuf [4]*entry
	var nextBuf [4]entry
	stored, next := storedBuf[:0], nextBuf[:0]
	b := newBinding()
	for i, spec := range l.specs {
		e := sh.lookup(spec, key)
		v, n := e.check(l.alg, now, l.params[i], c)
		b.add(i, v)
		stored, next = append(stored, e), append(next, n)
	}
	if b.allowed {
		for i, e := range stored {
			*e = next[i]
			e.commit(l.alg, now, l.params[i], c)
		}
	}
	return b.result(l.alg, l.limits), nil
}

// Policies implements Describer.
func (l *memoryLimiter) Policies() []Policy { return policies(l.alg, l.limits) }

// lookup returns the entry of one limit for key, creating it when missing.
// The caller holds sh.mu.
func (sh *memoryShard) lookup(spec uint32, key string) *entry {
	for int(spec) >= len(sh.entries) {
		sh.entries = append(sh.entries, map[string]*entry{})
	}
	m := sh.entries[spec]
	e := m[key]
	if e == nil {
		e = &entry{}
		m[key] = e
	}
	return e
}

// sweep drops entries whose state no longer matters. The caller holds sh.mu.
func (sh *memoryShard) sweep(now int64) {
	for _, m := range sh.entries {
		for k, e := range m {
			if e.expires <= now {
				delete(m, k)
			}
		}
	}
}
