package redisstore

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// leaseTableCapacity is the most keys one leased limiter remembers leases
// for.
const leaseTableCapacity = 1 << 16

// leaseShards divides a lease table so that decisions of different keys
// rarely wait on one lock.
const leaseShards = 64

// leaseBusy is where a key turns busy: a key asked for fewer units than
// this in the current span of ttl and the span before it is decided the
// exact way, batched with the store's other decisions, and costs Redis
// what it costs without leases; from leaseBusy on, a request without
// units is still decided the exact way, and when it passes the key asks
// for a lease in the background (a renewal). A lease costs Redis a grant
// and often a return, each about as much Redis time as a few decisions
// of a batch: below leaseBusy a lease would serve fewer decisions than it
// costs (make bench-compare's per-client rows; TestLeaseRoundTrips).
const leaseBusy = 8

// leaseReturnsCapacity is the most unspent leases a shard keeps waiting to
// be given back; beyond it a lease is not given back and simply ends in
// Redis with its window.
const leaseReturnsCapacity = 256

// leaseTable holds a leased limiter's leases (or one limit's, of a
// limiter of several: each limit has a table), per key, and spends them
// in memory under a shard's lock.
//
// Invariant: a decision from the table admits only units that Redis
// granted to this instance and counted in the key's window, before the
// lease's end on the leases' clock (leaseClock: the time elapsed since
// its grant was sent), which comes no later than its end in Redis; so
// what all instances admit from leases and from Redis is at most the
// limit per window (TestLeasesAtMostLimitPerKey).
//
// Capacity: leaseTableCapacity keys. A key the full table has no room for
// is decided in Redis, exactly, as without leases: a full table never
// gives a key free units, it only takes its decisions back to Redis
// (TestLeaseTableFullDecidesExactly; for several limits, a key that one
// limit's full table has no room for is decided exactly whatever the
// others hold, TestLeasedLimitsFullTableDecidesExactly). Keys whose
// leases ended and that saw no request for a ttl leave the table at the
// next sweep.
type leaseTable struct {
	seed     maphash.Seed
	size     atomic.Int64
	capacity int64
	busy     int // where a key turns busy: leaseBusy, or a test's
	shards   [leaseShards]leaseShard
}

type leaseShard struct {
	mu      sync.Mutex
	entries map[string]*leaseEntry
	returns []leaseReturn // unspent leases to give back (leaseReturnsCapacity)
	_       [40]byte      // keeps shards' locks on separate cache lines
}

// heldLease is one lease: units left of a grant, until end (the store's
// clock, Unix ns).
type heldLease struct {
	id   string
	left int
	end  int64
	// atEnd: the lease ends with its window, after which Redis takes no
	// units back.
	atEnd bool
}

// live reports whether l has units to spend at now.
func (l *heldLease) live(now int64) bool { return l.left > 0 && now < l.end }

// leaseEntry is a key's leases and what the table knows of its demand.
// cur is spent first; next is the lease a renewal brought while cur
// lasted.
type leaseEntry struct {
	cur, next heldLease
	granted   int   // the size of the last grant, for the prefetch (0: it granted nothing)
	keyLeft   int   // what Redis had left for the key after the last grant
	resetAt   int64 // when the key's quota is whole again, as of the last grant
	seeking   bool  // a grant for this key is on its way
	denied    int64 // until then (Unix ns) Redis denied the key: decide exactly
	epoch     int64 // start of the demand's current span of ttl
	demand    int   // units asked for since epoch
	before    int   // units asked for in the span before
	used      int64 // the last request (Unix ns)
}

// leaseReturn is a lease to give back: its key and id and the units left.
type leaseReturn struct {
	key, id string
	left    int
}

// leaseOutcome says how the table answered a request.
type leaseOutcome uint8

const (
	leaseSpent leaseOutcome = iota // admitted from a lease
	leaseSeek                      // no units: decide in Redis, then ask for a lease
	leaseExact                     // no units and no grant: decide in Redis
)

// newLeaseTable returns a table of capacity keys that turn busy at busy
// units within a ttl.
func newLeaseTable(capacity, busy int) *leaseTable {
	t := &leaseTable{seed: maphash.MakeSeed(), capacity: int64(capacity), busy: busy}
	for i := range t.shards {
		t.shards[i].entries = make(map[string]*leaseEntry)
	}
	return t
}

func (t *leaseTable) shard(key string) *leaseShard {
	return &t.shards[maphash.String(t.seed, key)%leaseShards]
}

// leaseSpend is what spend decided.
type leaseSpend struct {
	outcome   leaseOutcome
	remaining int   // leaseSpent: the lease's units left plus keyLeft
	resetAt   int64 // leaseSpent: the last grant's reset
	want      int   // leaseSeek, renew: the units to ask for
	renew     bool  // leaseSpent: the caller asks for the next lease
	// leaseSpent: the units taken from each of the key's leases, by id,
	// for refill.
	took [2]leaseTook
}

// leaseTook is units taken from the lease of id.
type leaseTook struct {
	id    string
	units int
}

// spend takes cost units for key at now from its leases. With none
// enough, the caller decides in Redis, and, for a busy key, asks for a
// lease when that admits (at most one on its way at a time per key). ttl is the leases' longest life (ns), most the
// largest lease.
func (t *leaseTable) spend(key string, cost int, now, ttl int64, most int) leaseSpend {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[key]
	if e == nil {
		if t.size.Load() >= t.capacity {
			return leaseSpend{outcome: leaseExact}
		}
		t.size.Add(1)
		e = &leaseEntry{epoch: now}
		s.entries[key] = e
		// A key's first request goes the exact way, batched with the
		// store's other decisions, and so do its next ones until it is
		// busy (leaseBusy).
		e.note(cost, now, ttl)
		return leaseSpend{outcome: leaseExact}
	}
	e.note(cost, now, ttl)
	s.promote(key, e, now)
	if e.cur.live(now) && e.cur.left+e.next.units(now) >= cost {
		n := min(cost, e.cur.left)
		e.cur.left -= n
		e.next.left -= cost - n
		left := e.cur.left + e.next.units(now)
		renew := !e.seeking && e.next.left == 0 && e.prefetch(left, now, ttl)
		e.seeking = e.seeking || renew
		return leaseSpend{outcome: leaseSpent, remaining: left + e.keyLeft, resetAt: e.resetAt, renew: renew, want: e.want(most),
			took: [2]leaseTook{{e.cur.id, n}, {e.next.id, cost - n}}}
	}
	if e.seeking || now < e.denied || max(e.demand, e.before) < t.busy {
		return leaseSpend{outcome: leaseExact}
	}
	e.seeking = true
	return leaseSpend{outcome: leaseSeek, want: e.want(most)}
}

// prefetch reports whether the key, with left units in its current lease
// and no next one, asks for the next lease at now: when a quarter of the
// last grant is left, or a quarter of the ttl of a lease that does not end
// with its window (so that a lease granted while the one before still had
// units, and spent from when that one ran out, is replaced before it
// ends, not after). Never after a grant of nothing, until a grant brings
// units: a key Redis has nothing more for must not ask at every request.
func (e *leaseEntry) prefetch(left int, now, ttl int64) bool {
	if e.granted == 0 {
		return false
	}
	return 4*left <= e.granted || !e.cur.atEnd && 4*(e.cur.end-now) <= ttl
}

// units returns the units l has left at now.
func (l *heldLease) units(now int64) int {
	if now < l.end {
		return l.left
	}
	return 0
}

// note counts cost units asked for at now in the key's demand.
func (e *leaseEntry) note(cost int, now, ttl int64) {
	e.used = now
	if since := now - e.epoch; since >= ttl {
		e.before = 0
		if since < 2*ttl {
			e.before = e.demand
		}
		e.demand, e.epoch = 0, now
	}
	e.demand += cost
}

// want is the size of the key's next lease: what it was asked for in
// about the last ttl, at least 1, at most most.
func (e *leaseEntry) want(most int) int {
	return min(max(e.demand, e.before, 1), most)
}

// promote makes next the current lease when cur is spent or over, and
// keeps cur's unspent units to give back. The shard's lock is held.
func (s *leaseShard) promote(key string, e *leaseEntry, now int64) {
	if e.cur.live(now) || e.next.id == "" {
		return
	}
	s.giveBack(key, &e.cur)
	e.cur, e.next = e.next, heldLease{}
}

// giveBack queues l's unspent units to be given back, unless its window
// has ended or the queue is full, and empties l. The lock is held.
func (s *leaseShard) giveBack(key string, l *heldLease) {
	if l.left > 0 && !l.atEnd && len(s.returns) < leaseReturnsCapacity {
		s.returns = append(s.returns, leaseReturn{key: key, id: l.id, left: l.left})
	}
	*l = heldLease{}
}

// granted installs a lease Redis granted for key (l, with keyLeft and
// resetAt its reply's), ends the key's seeking, and notes a denial until
// deniedUntil (0 for none). A key the table no longer holds gets its lease
// back to Redis.
func (t *leaseTable) granted(key string, l heldLease, keyLeft int, resetAt, deniedUntil int64, now int64) {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[key]
	if e == nil {
		s.giveBack(key, &l)
		return
	}
	e.seeking = false
	e.denied = deniedUntil
	if l.id == "" {
		e.granted = 0 // no prefetch until a grant brings units
		return
	}
	e.keyLeft, e.resetAt, e.granted = keyLeft, resetAt, l.left
	switch {
	case !e.cur.live(now):
		s.giveBack(key, &e.cur)
		e.cur = l
	case e.next.id == "":
		e.next = l
	default:
		s.giveBack(key, &e.next)
		e.next = l
	}
}

// refill puts back into key's leases the units spend took from them (a
// request of several limits that another limit could not admit from its
// leases). Units go back only to the lease they came from, by id, as the
// key's current or next lease, never into a lease of another window; one
// that ended keeps them unspendable. A lease replaced since (a renewal
// landed after spend emptied it) has them given back to Redis, added to
// its return when one is queued: Redis gives back once per lease, so a
// lease whose return was sent already keeps them, lost to every instance
// until its window ends (the strict side; TestLeaseTableRefill).
func (t *leaseTable) refill(key string, took [2]leaseTook) {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[key]
	if e == nil {
		return
	}
	for _, tk := range took {
		if tk.units == 0 {
			continue
		}
		switch tk.id {
		case e.cur.id:
			e.cur.left += tk.units
		case e.next.id:
			e.next.left += tk.units
		default:
			s.giveBackUnits(key, tk)
		}
	}
}

// giveBackUnits queues tk's units to be given back to the lease they
// came from, added to that lease's queued return if there is one. The
// lock is held.
func (s *leaseShard) giveBackUnits(key string, tk leaseTook) {
	for i := range s.returns {
		if r := &s.returns[i]; r.id == tk.id && r.key == key {
			r.left += tk.units
			return
		}
	}
	if len(s.returns) < leaseReturnsCapacity {
		s.returns = append(s.returns, leaseReturn{key: key, id: tk.id, left: tk.units})
	}
}

// unseek ends key's seeking after a grant that failed.
func (t *leaseTable) unseek(key string) {
	s := t.shard(key)
	s.mu.Lock()
	if e := s.entries[key]; e != nil {
		e.seeking = false
	}
	s.mu.Unlock()
}

// drop forgets key's leases, without giving them back (Reset).
func (t *leaseTable) drop(key string) {
	s := t.shard(key)
	s.mu.Lock()
	if _, ok := s.entries[key]; ok {
		delete(s.entries, key)
		t.size.Add(-1)
	}
	s.mu.Unlock()
}

// sweep queues the leases that ended with units left, and those of keys
// that saw no request for ttl (cold), to be given back; it forgets cold
// keys that are not seeking, and all keys when all is set (Close). It
// appends the queued returns to dst and returns it.
func (t *leaseTable) sweep(dst []leaseReturn, now, ttl int64, all bool) []leaseReturn {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for key, e := range s.entries {
			cold := all || now-e.used >= ttl
			if cold || !e.cur.live(now) {
				s.giveBack(key, &e.cur)
			}
			if cold || !e.next.live(now) {
				s.giveBack(key, &e.next)
			}
			if cold && !e.seeking {
				delete(s.entries, key)
				t.size.Add(-1)
			}
		}
		dst = append(dst, s.returns...)
		clear(s.returns)
		s.returns = s.returns[:0]
		s.mu.Unlock()
	}
	return dst
}
