package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// concurrencyState holds the leases of one concurrency limit in a memory
// store, spread over shards with a lock each. A key has an entry only while
// it holds a lease: the last release, or the collection of its last expired
// lease, removes it, so memory follows the requests in flight.
type concurrencyState struct {
	clock  func() time.Time
	sweep  int64 // µs between passes that collect expired leases
	seed   maphash.Seed
	shards [shardCount]concShard
}

type concShard struct {
	mu        sync.Mutex
	keys      map[string]*concEntry
	nextSweep int64 // µs
	_         [40]byte
}

// concEntry is one key's leases: id -> expiry in µs. first is the earliest
// expiry, or earlier (a release of the earliest lease leaves it behind):
// until the clock reaches it no lease can have expired.
type concEntry struct {
	leases map[uint64]int64
	first  int64
}

// shard returns key's shard.
func (st *concurrencyState) shard(key string) *concShard {
	return &st.shards[maphash.String(st.seed, key)&(shardCount-1)]
}

// collect drops the leases expired at now and makes first exact.
func (e *concEntry) collect(now int64) {
	first := int64(1<<63 - 1)
	for id, exp := range e.leases {
		if exp <= now {
			delete(e.leases, id)
		} else if exp < first {
			first = exp
		}
	}
	e.first = first
}

// NewConcurrency implements Store: a limiter on the store's leases, shared by every
// concurrency limiter on s whatever its maximum, as on Redis: limiters of
// a rollout that changes the maximum count the same leases.
func (s *Store) NewConcurrency(limit int, lease, retryAfter time.Duration) (algorithms.ConcurrencyLimiter, error) {
	if s == nil || s.shards == nil {
		return nil, fmt.Errorf("%w: a memory store must come from New", algorithms.ErrInvalidOption)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.conc
	if st == nil {
		st = &concurrencyState{clock: s.cfg.clock, sweep: s.cfg.sweep.Microseconds(), seed: maphash.MakeSeed()}
		for i := range st.shards {
			st.shards[i].keys = map[string]*concEntry{}
		}
		s.conc = st
	}
	return &memoryConcurrency{state: st, limit: limit, lease: lease.Microseconds(), stats: &ratemath.HoldStats{Fixed: retryAfter}}, nil
}

// memoryConcurrency is a concurrency limit in process memory.
type memoryConcurrency struct {
	state *concurrencyState
	limit int
	lease int64 // µs
	stats *ratemath.HoldStats
}

// Acquire implements ConcurrencyLimiter. It never waits, so it does not
// consult ctx.
func (m *memoryConcurrency) Acquire(_ context.Context, key string) (*algorithms.Lease, error) {
	if err := ratemath.CheckKey(key); err != nil {
		return nil, err
	}
	st := m.state
	sh := st.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	at := st.clock()
	now := at.UnixMicro()
	sh.housekeep(now, st.sweep)

	e := sh.keys[key]
	if e != nil && now >= e.first {
		e.collect(now)
	}
	held := 0
	if e != nil {
		held = len(e.leases)
	}
	if held >= m.limit {
		// A denial needs the exact earliest expiry for its RetryAfter.
		e.collect(now)
		until := time.Duration(e.first-now) * time.Microsecond
		return &algorithms.Lease{Limit: m.limit, InFlight: held, RetryAfter: m.stats.RetryAfter(until)}, nil
	}
	if e == nil {
		e = &concEntry{leases: make(map[uint64]int64, 1), first: int64(1<<63 - 1)}
		sh.keys[key] = e
	}
	id := ratemath.LeaseSeq.Add(1)
	exp := now + m.lease
	e.leases[id] = exp
	e.first = min(e.first, exp)
	held++
	ml := &memoryLease{
		lease: algorithms.Lease{Allowed: true, Limit: m.limit, InFlight: held, Remaining: m.limit - held},
		owner: m, key: key, id: id, acquired: at,
	}
	ml.lease.Owner = ml
	return &ml.lease, nil
}

// memoryLease is a lease taken in memory, with what its release needs:
// one allocation per lease.
type memoryLease struct {
	lease    algorithms.Lease
	owner    *memoryConcurrency
	key      string
	id       uint64
	acquired time.Time
}

// Release implements the Lease's Owner.
func (l *memoryLease) Release(context.Context) error {
	return l.owner.release(l.key, l.id, l.acquired)
}

// release gives back lease id of key, acquired at acquired.
func (m *memoryConcurrency) release(key string, id uint64, acquired time.Time) error {
	st := m.state
	sh := st.shard(key)
	sh.mu.Lock()
	now := st.clock()
	if e := sh.keys[key]; e != nil {
		delete(e.leases, id)
		if len(e.leases) == 0 {
			delete(sh.keys, key)
		}
	}
	sh.mu.Unlock()
	m.stats.Observe(now.Sub(acquired))
	return nil
}

// housekeep collects the expired leases of every key in the shard once per
// interval, so that a key whose leases were never released and that sees
// no request again does not stay. The caller holds sh.mu.
func (sh *concShard) housekeep(now, interval int64) {
	if now < sh.nextSweep {
		return
	}
	sh.nextSweep = now + interval
	for key, e := range sh.keys {
		if now >= e.first {
			e.collect(now)
		}
		if len(e.leases) == 0 {
			delete(sh.keys, key)
		}
	}
	if len(sh.keys) == 0 {
		// A map keeps its buckets after a flood of keys: start afresh.
		sh.keys = map[string]*concEntry{}
	}
}

// StoreName returns "memory", for observers.
func (m *memoryConcurrency) StoreName() string { return "memory" }
