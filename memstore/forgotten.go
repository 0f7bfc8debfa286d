package memstore

import (
	"math/bits"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// forgotten remembers, for a full shard, what the entries it forgot before
// they were fresh still held, so that forgetting never gives a key more
// than it had.
//
// Invariant: when a shard forgets an entry that still mattered (its
// client had used some of its quota, and it would not be fresh yet), the
// slot of the entry's key hash keeps the share of the quota the entry had
// left and when it would have been fresh; while that lasts, a key of that
// slot that has no entry under a limit starts from that share of the
// limit's quota (at least forgottenAllowance units), not from a fresh
// one. Two marks in one slot keep the smaller share and the later end.
// Each forgetting so gives a key at most forgottenAllowance units more
// than it had, and an attacker who floods new keys to make the store
// forget gains nothing else; but only the new keys its shard takes in
// bound how often a key is forgotten, so a key cycled through eviction
// gains forgottenAllowance a cycle, however many cycles a window holds
// (32 keys cycled through a shard of 16 passed 99 to 109 each of a quota
// of 10 in 3.2 ms: TestAttackCyclingThroughEvictionOneShard). A key that
// shares a marked slot starts from what the forgotten one had left, at
// least forgottenAllowance units a window, never locked out; marks are
// per slot, not per limit, so a mark left under one limiter holds a key
// of the slot under another (TestAttackCollidingAcrossLimiters). A new
// entry so started may stay spent a little longer than the forgotten one
// would have (its units are spent at the time it starts): stricter, never
// looser, by at most one period (of its own limit).
//
// Capacity: a quarter as many slots as the shard holds entries (at least
// 64), 16 bytes each, allocated when the shard first forgets an entry that
// still mattered: about 4 MB for the default million entries.
//
// Proved by TestForgettingGivesNoFreshQuota, the attacks of
// forgotten_attack_test.go and, through the Redis store's local twin,
// TestScaleForgottenAnswers.
type forgotten struct {
	marks []forgetMark // a power of two of them; nil until the first mark
}

// forgetMark is one slot: until (µs) when what it says stops mattering,
// and left, the share of the quota the forgotten entries had left, out of
// shareOne.
type forgetMark struct {
	until int64
	left  uint32
}

// shareOne is a whole quota in forgetMark.left.
const shareOne = 1 << 24

// forgottenAllowance is the least a key of a marked slot starts from: one
// unit, so that a forgotten client, or one that shares its slot, is never
// locked out by the forgetting.
const forgottenAllowance = 1

// mark records that an entry with remaining of quota units left, fresh at
// until (µs), was forgotten at now; capacity is the shard's.
func (f *forgotten) mark(tag uint32, remaining, quota, until, now int64, capacity int) {
	if f.marks == nil {
		f.marks = make([]forgetMark, 1<<bits.Len(uint(max(64, capacity/4)-1)))
	}
	left := uint32(min(max(remaining, 0), quota) * shareOne / quota)
	m := &f.marks[tag&uint32(len(f.marks)-1)]
	if m.until <= now {
		*m = forgetMark{until: until, left: left}
		return
	}
	m.left, m.until = min(m.left, left), max(m.until, until)
}

// start sets e, a key's missing entry under a limit, to what it starts
// from at now: fresh, unless the key's slot is marked, then spent down to
// the mark's share of the quota.
func (f *forgotten) start(e *ratemath.Entry, tag uint32, alg algorithms.Algorithm, p ratemath.Params, now int64) {
	if f.marks == nil {
		return
	}
	m := f.marks[tag&uint32(len(f.marks)-1)]
	if m.until <= now {
		return
	}
	q := quotaOf(alg, p)
	keep := max(forgottenAllowance, int64(m.left)*q/shareOne)
	if spend := q - keep; spend > 0 {
		if v := e.Decide(alg, now, p, spend, 0); v.OK {
			e.Commit(alg, now, p, spend)
		}
	}
}

// quotaOf is what a fresh entry of alg holds: the window's quota or the
// bucket's capacity.
func quotaOf(alg algorithms.Algorithm, p ratemath.Params) int64 {
	if alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket {
		return p.Burst
	}
	return p.Rate
}
