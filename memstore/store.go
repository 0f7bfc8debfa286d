// Package memstore is the in-process algorithms.Store: rate limits and
// concurrency limits in this process's memory, in shards with a bounded
// index and eviction. It suits a single instance and tests (WithClock), and
// is the Redis store's stand-in while Redis cannot decide.
package memstore

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"time"

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
// of its quota, weighted by the time left until it would be fresh anyway;
// a well-used key is forgotten only when every entry sampled is used as
// much. A forgotten key does not start afresh: until it would have been
// fresh, it starts from the share of its quota it had left, at least one
// unit (the share is kept per slot of the key's hash,
// so a key that shares the slot starts from it too), and an attacker who
// forces evictions by flooding new keys gains one unit for a key it
// manages to have forgotten, not a quota.
//
// Expired entries are dropped by passes over each shard (see
// WithSweepInterval) that examine a few entries per request, so no request
// waits for a whole shard. A shard's maps are rebuilt when a pass finds them
// at a quarter of their peak, so memory returns after a flood of keys goes
// quiet, and a limit with no entries left in a shard leaves nothing there.
// Housekeeping happens on requests: a shard that serves none keeps what it
// holds.
type Store struct {
	seed     maphash.Seed
	shards   []memoryShard
	shardCap int              // entries one shard holds at most
	sweepUS  int64            // cfg.sweep in µs
	clock    func() time.Time // WithClock's, or nil: see now
	started  time.Time        // with its monotonic reading
	epochNS  int64            // started in ns since the Unix epoch
	cfg      config

	mu    sync.Mutex
	specs map[string]uint32 // algorithm and limit -> the id entries are filed under
	conc  *concurrencyState // the leases of every concurrency limit, whatever its maximum (concurrency.go)
}

// New returns a store that keeps state in process memory, or an error
// wrapping algorithms.ErrInvalidOption for an invalid option (a nil one
// among them). The store starts no goroutine: its housekeeping happens on
// requests (see Store), and Close has nothing to stop.
func New(opts ...Option) (*Store, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	n := minShards
	for n < maxShards && cfg.maxKeys/n > shardTarget {
		n *= 2
	}
	started := time.Now()
	return &Store{
		cfg: cfg, seed: maphash.MakeSeed(), specs: map[string]uint32{},
		// Positions in a table are 32-bit.
		shards: make([]memoryShard, n), shardCap: min(cfg.maxKeys/n, math.MaxInt32),
		sweepUS: cfg.sweep.Microseconds(), clock: cfg.setClock,
		started: started, epochNS: started.UnixNano(),
	}, nil
}

// Close implements the stores' lifecycle (see redisstore.Store.Close): a
// memory store runs nothing in the background, so Close has nothing to
// stop, send or wait for, and returns nil whatever ctx; its limiters go on
// deciding as before.
func (s *Store) Close(ctx context.Context) error { return nil }

// now is the store's time in µs since the Unix epoch: WithClock's, or by
// default the wall time at New plus the monotonic time since, which never
// steps back with the wall clock and costs one clock read where time.Now
// costs two.
func (s *Store) now() int64 {
	if s.clock != nil {
		return s.clock().UnixMicro()
	}
	return (s.epochNS + int64(time.Since(s.started))) / 1e3
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
	l := &memoryLimiter{store: s, alg: alg, limits: limits, policies: ratemath.PoliciesOf(alg, limits)}
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
	l.leastQuota = slices.MinFunc(l.policies, func(a, b algorithms.Policy) int { return cmp.Compare(a.Quota, b.Quota) }).Quota
	return l, nil
}

type memoryLimiter struct {
	store    *Store
	alg      algorithms.Algorithm
	limits   []algorithms.Limit
	specs    []uint32
	params   []ratemath.Params
	policies []algorithms.Policy // of limits, for results
	// leastQuota is the least of the limits' quotas: a cost above it fails.
	leastQuota int
}

// Policies implements RateLimiter.
func (l *memoryLimiter) Policies() []algorithms.Policy { return ratemath.PoliciesOf(l.alg, l.limits) }
