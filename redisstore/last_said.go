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

// lastSaid remembers, per key, Redis's last answers, so that the local
// twin starts from them when Redis cannot decide.
//
// Invariant: the twin never starts a key from more than Redis's answers
// allow, under every limit of the limiter, and a key whose answers this
// table may have forgotten starts from forgottenAllowance, never from a
// full share. An admission's answer is a floor under every limit (Result
// describes the limit with the least remaining, so each other limit had
// at least that much): each limit is taken to hold no more than it until
// the answer can no longer matter for that limit (the binding limit's
// ResetAfter; for the others, the longest a window takes to be whole
// again, Period, or two for the sliding window counter), a bucket
// refilling at its rate meanwhile. A denial's answer bounds its binding
// limit the same way and keeps the floor an earlier admission left. Later
// answers replace earlier ones, by when their requests were sent, in
// whatever order they arrive. The twin's first decision of a key so
// starts from this instance's share of the least any limit may hold, less
// what this instance owes Redis for the key.
//
// Capacity: lastSaidSlots slots of about 100 bytes, one key per slot by
// its hash. A key that takes a slot whose answers still mattered marks
// the slot as having forgotten until they would have stopped mattering;
// a key that finds no answers of its own in a slot so marked may have
// been forgotten, and starts from forgottenAllowance units (less when its
// share is less) whatever its twin held, however many keys an attacker
// sends: forgetting gives a key less, never a fresh share. A key that
// finds an unmarked slot was never answered for in this instance, and
// starts from a full share.
//
// Proved by TestLocalStartsFromRedis, TestLocalRemembersEveryLimit,
// TestLocalForgetsStrictly (four times a capacity of 1,024),
// TestLastSaidKeepsTheLaterAnswer, TestChargesAcrossInstances and, at
// 40,000 and 160,000 identities against the default capacity,
// TestScaleForgottenAnswers (make test-scale).
type lastSaid struct {
	seed  maphash.Seed
	locks [64]sync.Mutex
	slots []saidSlot // a power of two of them
}

// lastSaidSlots is the table's size: the keys a busy instance serves
// within a period before it forgets strictly (about 3 MB a store).
const lastSaidSlots = 1 << 15

// forgottenAllowance is what a key the fault path cannot account for
// (its answers forgotten, or no room to owe Redis for it) may be admitted
// locally per instance while it cannot: a first request passes, and the
// limit stays L + n.
const forgottenAllowance = 1

// saidAnswer is one of Redis's answers for a key: what its binding limit
// (index) had left, when the request was sent (at, Unix ns; 0 for none),
// and how long until that limit was whole again.
type saidAnswer struct {
	at        int64
	remaining int64
	whole     time.Duration
	index     int
}

type saidSlot struct {
	hash    uint64     // of the limiter and key; 0 for an empty slot
	floor   saidAnswer // the last admission: a floor under every limit
	denial  saidAnswer // the last denial, if later than floor
	applied bool       // the twin has started from them
	until   int64      // Unix ns: when the answers stop mattering
	// forgot is until when (Unix ns) a key not in the slot may have been
	// forgotten by it.
	forgot int64
}

// newLastSaid returns a table of n slots, a power of two.
func newLastSaid(n int) *lastSaid {
	return &lastSaid{seed: maphash.MakeSeed(), slots: make([]saidSlot, n)}
}

// slot returns key's hash, its slot and the slot's lock.
func (s *lastSaid) slot(l *redisLimiter, key string) (uint64, *saidSlot, *sync.Mutex) {
	h := (maphash.String(s.seed, key) ^ l.salt) | 1
	i := h & uint64(len(s.slots)-1)
	return h, &s.slots[i], &s.locks[i&63]
}

// remember records Redis's answer res for key, sent at.
func (s *lastSaid) remember(l *redisLimiter, key string, at time.Time, res algorithms.Result) {
	if s == nil {
		return
	}
	a := saidAnswer{at: at.UnixNano(), remaining: int64(res.Remaining), whole: res.ResetAfter, index: res.Index}
	h, sl, mu := s.slot(l, key)
	mu.Lock()
	defer mu.Unlock()
	if sl.hash != h {
		// The answers it held may still matter: whoever finds the slot
		// without answers of its own until then may be the key they
		// were about.
		*sl = saidSlot{hash: h, forgot: max(sl.forgot, sl.until)}
	}
	// An answer may be remembered after a later one for the same key (its
	// request's owner had it, and sent the next, first): the later stays.
	switch {
	case res.Allowed && a.at >= sl.floor.at:
		sl.floor = a
		if sl.denial.at <= a.at {
			sl.denial = saidAnswer{}
		}
	case !res.Allowed && a.at >= sl.denial.at && a.at >= sl.floor.at:
		sl.denial = a
	default:
		return
	}
	sl.applied = false
	sl.until = max(sl.until, a.at+int64(l.saidSpan))
}

// startKind says what the twin starts a key from.
type startKind int8

const (
	startAsIs      startKind = iota // its own state: already started, or never answered for
	startFromRoom                   // the room Redis's answers leave
	startForgotten                  // forgottenAllowance: the answers may have been forgotten
)

// take returns what the twin starts key from at now, once per answer for
// a key with answers; every time for a key that may have been forgotten.
func (s *lastSaid) take(l *redisLimiter, key string, now time.Time) (int64, startKind) {
	if s == nil {
		return 0, startAsIs
	}
	h, sl, mu := s.slot(l, key)
	mu.Lock()
	defer mu.Unlock()
	t := now.UnixNano()
	if sl.hash != h || sl.floor.at == 0 && sl.denial.at == 0 {
		if t < sl.forgot {
			return 0, startForgotten
		}
		return 0, startAsIs
	}
	if sl.applied {
		return 0, startAsIs
	}
	sl.applied = true
	room, bounded := l.roomAfter(sl.floor, sl.denial, t)
	if sl.floor.at == 0 && t < sl.forgot && len(l.limits) > 1 {
		// A denial alone bounds only its limit: the others' floor may
		// have been forgotten.
		return min(room, forgottenAllowance*int64(l.instances)), startFromRoom
	}
	if !bounded {
		return 0, startAsIs
	}
	return room, startFromRoom
}

// roomAfter returns the least that any limit may hold at t (Unix ns)
// after the answers floor and denial (at 0: none), and whether any answer
// still bounds a limit.
func (l *redisLimiter) roomAfter(floor, denial saidAnswer, t int64) (int64, bool) {
	room, bounded := int64(math.MaxInt64), false
	for j, lim := range l.limits {
		q := int64(ratemath.QuotaOf(l.alg, lim))
		r := q
		for k, a := range [2]saidAnswer{floor, denial} {
			if a.at == 0 || k == 1 && a.index != j {
				continue // a denial bounds its binding limit only
			}
			if v, ok := l.roomOf(lim, j, a, t); ok {
				r, bounded = min(r, v), true
			}
		}
		room = min(room, r)
	}
	return max(room, 0), bounded
}

// roomOf is what limit lim (at position j) may hold at t after answer a:
// a.remaining until the answer stops mattering for it (see lastSaid), a
// bucket refilling at its rate meanwhile; false once it no longer matters.
func (l *redisLimiter) roomOf(lim algorithms.Limit, j int, a saidAnswer, t int64) (int64, bool) {
	since := time.Duration(t - a.at)
	q := int64(ratemath.QuotaOf(l.alg, lim))
	perNs := float64(lim.Rate) / float64(lim.Period)
	if l.alg == algorithms.TokenBucket || l.alg == algorithms.LeakyBucket {
		if j == a.index {
			// Whole at a.whole, refilling at its rate until then from
			// wherever it was (a debt included).
			if since >= a.whole {
				return 0, false
			}
			toGo := float64(a.whole-max(since, 0)) * perNs
			return max(a.remaining, q-int64(math.Ceil(toGo))), true
		}
		v := a.remaining + int64(float64(max(since, 0))*perNs)
		return min(v, q), v < q
	}
	span := a.whole
	if j != a.index {
		span = windowSpan(l.alg, lim)
	}
	if since >= span {
		return 0, false
	}
	return a.remaining, true
}

// windowSpan is the longest a window algorithm's limit takes to be whole
// again after an answer: a Period, two for the sliding window counter.
func windowSpan(alg algorithms.Algorithm, lim algorithms.Limit) time.Duration {
	if alg == algorithms.SlidingWindowCounter {
		return 2 * lim.Period
	}
	return lim.Period
}

// saidSpanOf is the longest any answer of a limiter of limits can matter:
// the longest window span, or bucket refill.
func saidSpanOf(alg algorithms.Algorithm, limits []algorithms.Limit) time.Duration {
	var span time.Duration
	for _, lim := range limits {
		if alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket {
			span = max(span, lim.Refill())
			continue
		}
		span = max(span, windowSpan(alg, lim))
	}
	return span
}

// forget drops Redis's answers for key: a reset key starts afresh.
func (s *lastSaid) forget(l *redisLimiter, key string) {
	if s == nil {
		return
	}
	h, sl, mu := s.slot(l, key)
	mu.Lock()
	if sl.hash == h {
		*sl = saidSlot{forgot: sl.forgot}
	}
	mu.Unlock()
}

// startFromRedis sets the twin's state of key to this instance's share of
// what Redis's answers leave, less what this instance owes for it, or to
// forgottenAllowance when they may have been forgotten. The batcher's
// lock is held.
func (l *redisLimiter) startFromRedis(key string) {
	g := l.guard
	room, kind := g.said.take(l, key, g.clock())
	switch kind {
	case startAsIs:
		return
	case startForgotten:
		l.capTwin(key, forgottenAllowance)
		return
	}
	if o := g.batcher.owed[queueKey{l, key}]; o != nil {
		room -= int64(l.instances) * (o.cost + o.doubt)
	}
	_ = l.twin.Reset(context.Background(), key)
	l.capTwin(key, max(room, 0)/int64(l.instances))
}

// capTwin takes from the twin's state of key what it holds beyond share
// under its fullest limit: each limit then holds at most share.
func (l *redisLimiter) capTwin(key string, share int64) {
	if take := int64(l.twinMost) - share; take > 0 {
		_, _ = l.twin.Charge(context.Background(), key, int(take))
	}
}
