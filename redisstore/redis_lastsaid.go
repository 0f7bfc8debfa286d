package redisstore

import (
	"context"
	"hash/maphash"
	"math"
	"sync"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// lastSaid remembers, per key, Redis's last answer, so that the local twin
// starts from it when Redis cannot decide.
//
// Invariant: the twin's first decision of a key after Redis answered for
// it starts from this instance's share of what Redis said was left (less
// what this instance owes Redis for the key), not from a full share, for
// as long as the answer can matter: until its ResetAfter, when the quota is
// whole again anyway. A bucket's room is what it lacks to be whole at
// ResetAfter less what it refills meanwhile at its rate, as it does (a
// bucket in debt after a charge included); a window's is taken to stay as
// it was, which errs on the strict side. Later answers start the twin again from them.
//
// It is a table of a fixed number of slots, each key hashed to one: a
// write costs a hash and an uncontended lock, and memory stays fixed
// (lastSaidSlots × 48 bytes). Two keys in one slot overwrite each other,
// and a key that lost its slot starts from a full share, as a key Redis
// never answered for does.
//
// Proved by TestLocalStartsFromRedis and TestChargesAcrossInstances.
type lastSaid struct {
	seed  maphash.Seed
	locks [64]sync.Mutex
	slots []saidSlot
}

// lastSaidSlots is the table's size: enough for the keys a busy instance
// serves within a fault's few seconds.
const lastSaidSlots = 1 << 14

type saidSlot struct {
	hash      uint64 // of the limiter and key; 0 for an empty slot
	remaining int64
	at        time.Time     // when the request was sent
	whole     time.Duration // ResetAfter: until the quota is whole again
	index     int           // of the limit the answer describes
	applied   bool          // the twin has started from it
}

func newLastSaid() *lastSaid {
	return &lastSaid{seed: maphash.MakeSeed(), slots: make([]saidSlot, lastSaidSlots)}
}

// slot returns key's hash, its slot and the slot's lock.
func (s *lastSaid) slot(l *redisLimiter, key string) (uint64, *saidSlot, *sync.Mutex) {
	h := (maphash.String(s.seed, key) ^ l.salt) | 1
	i := h & (lastSaidSlots - 1)
	return h, &s.slots[i], &s.locks[i&63]
}

// remember records Redis's answer res for key, sent at.
func (s *lastSaid) remember(l *redisLimiter, key string, at time.Time, res algorithms.Result) {
	if s == nil {
		return
	}
	h, sl, mu := s.slot(l, key)
	mu.Lock()
	*sl = saidSlot{hash: h, remaining: int64(res.Remaining), at: at, whole: res.ResetAfter, index: res.Index}
	mu.Unlock()
}

// take returns, once, the room Redis's last answer for key leaves at now:
// false when there is none to start from (none, or already started from,
// or past its ResetAfter).
func (s *lastSaid) take(l *redisLimiter, key string, now time.Time) (int64, bool) {
	if s == nil {
		return 0, false
	}
	h, sl, mu := s.slot(l, key)
	mu.Lock()
	if sl.hash != h || sl.applied {
		mu.Unlock()
		return 0, false
	}
	sl.applied = true
	e := *sl
	mu.Unlock()
	since := now.Sub(e.at)
	if since >= e.whole {
		return 0, false
	}
	room := e.remaining
	if l.alg == algorithms.TokenBucket || l.alg == algorithms.LeakyBucket {
		// A bucket is whole at e.whole and refills at Rate per Period
		// until then, from wherever it was (a debt included): what it
		// holds now is the quota less what is still to refill.
		lim := l.limits[0]
		if e.index > 0 && e.index < len(l.limits) {
			lim = l.limits[e.index]
		}
		toGo := float64(e.whole-max(since, 0)) * float64(lim.Rate) / float64(lim.Period)
		room = max(room, int64(ratemath.QuotaOf(l.alg, lim))-int64(math.Ceil(toGo)))
	}
	return max(room, 0), true
}

// forget drops Redis's last answer for key.
func (s *lastSaid) forget(l *redisLimiter, key string) {
	if s == nil {
		return
	}
	h, sl, mu := s.slot(l, key)
	mu.Lock()
	if sl.hash == h {
		*sl = saidSlot{}
	}
	mu.Unlock()
}

// startFromRedis sets the twin's state of key to this instance's share of
// what Redis last said was left, less what this instance owes for it,
// when there is an answer to start from. The batcher's lock is held.
func (l *redisLimiter) startFromRedis(key string) {
	g := l.guard
	room, ok := g.said.take(l, key, g.clock())
	if !ok {
		return
	}
	if o := g.batcher.owed[queueKey{l, key}]; o != nil {
		room -= int64(l.instances) * (o.cost + o.doubt)
	}
	share := max(room, 0) / int64(l.instances)
	_ = l.twin.Reset(context.Background(), key)
	// Take from the twin what it would have beyond the share: the most of
	// any of its limits, each clamped to what it holds.
	most := 0
	for _, lim := range l.twinLimits {
		most = max(most, ratemath.QuotaOf(l.alg, lim))
	}
	if take := int64(most) - share; take > 0 {
		_, _ = l.twin.Charge(context.Background(), key, int(take))
	}
}
