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
// left, when it would have been fresh, and one bit of 32 for the key and
// its limit (seenBit); while that lasts, a key of that slot whose bit is
// set and that has no entry under that limit starts from that share of
// the limit's quota (at least forgottenAllowance units), not from a fresh
// one. Two marks in one slot keep the smaller share, the later end and
// both bits. A forgotten key always finds its bit set, so each forgetting
// gives a key at most forgottenAllowance units more than it had, and an
// attacker who floods new keys to make the store forget gains nothing
// else; but only the new keys its shard takes in bound how often a key is
// forgotten, so a key cycled through eviction gains forgottenAllowance a
// cycle, however many cycles a window holds (32 keys cycled through a
// shard of 16 passed 99 to 109 each of a quota of 10 in 3.2 ms:
// TestAttackCyclingThroughEvictionOneShard). A key or a limit whose bit
// is not set starts fresh: a newcomer is held only when its bit collides
// with a forgotten key's (one chance in 32 per key forgotten in its slot
// during the mark, at most), so forgettings do not compound from one
// newcomer to the next (TestForgettingSparesNewcomers), and a mark left
// under one limit seldom holds another's keys
// (TestAttackCollidingAcrossLimiters). A key held by a mark starts from
// what the forgotten one had left, at least forgottenAllowance units a
// window, never locked out. A new entry so started may stay spent a
// little longer than the forgotten one would have (its units are spent at
// the time it starts): stricter, never looser, by at most one period (of
// its own limit).
//
// Capacity: a quarter as many slots as the shard holds entries (at least
// 64), 16 bytes each, allocated when the shard first forgets an entry that
// still mattered: about 4 MB for the default million entries.
//
// Proved by TestForgettingGivesNoFreshQuota, TestForgettingSparesNewcomers,
// the attacks of forgotten_attack_test.go and, through the Redis store's
// local twin, TestScaleForgottenAnswers.
type forgotten struct {
	marks []forgetMark // a power of two of them; nil until the first mark
}

// forgetMark is one slot: until (µs) when what it says stops mattering,
// left, the share of the quota the forgotten entries had left, out of
// shareOne, and seen, the seenBit of each of them.
type forgetMark struct {
	until int64
	left  uint32
	seen  uint32
}

// seenBit is the bit of a forgetMark's seen that stands for the key of tag
// under the limit spec: one of 32, drawn from every bit of both (the
// slot's index uses tag's low bits).
func seenBit(tag, spec uint32) uint32 {
	return 1 << (((tag ^ spec*0x9e3779b9) * 0x85ebca6b) >> 27)
}

// shareOne is a whole quota in forgetMark.left.
const shareOne = 1 << 24

// forgottenAllowance is the least a key of a marked slot starts from: one
// unit, so that a forgotten client, or one that shares its slot, is never
// locked out by the forgetting.
const forgottenAllowance = 1

// mark records that the entry of the key of tag under the limit spec, with
// remaining of quota units left, fresh at until (µs), was forgotten at
// now; capacity is the shard's.
func (f *forgotten) mark(tag, spec uint32, remaining, quota, until, now int64, capacity int) {
	if f.marks == nil {
		f.marks = make([]forgetMark, 1<<bits.Len(uint(max(64, capacity/4)-1)))
	}
	left := uint32(min(max(remaining, 0), quota) * shareOne / quota)
	m := &f.marks[tag&uint32(len(f.marks)-1)]
	if m.until <= now {
		*m = forgetMark{until: until, left: left, seen: seenBit(tag, spec)}
		return
	}
	m.left, m.until, m.seen = min(m.left, left), max(m.until, until), m.seen|seenBit(tag, spec)
}

// start sets e, the missing entry of the key of tag under the limit spec,
// to what it starts from at now: fresh, unless the key's slot is marked
// with its bit, then spent down to the mark's share of the quota.
func (f *forgotten) start(e *ratemath.Entry, tag, spec uint32, alg algorithms.Algorithm, p ratemath.Params, now int64) {
	if f.marks == nil {
		return
	}
	m := f.marks[tag&uint32(len(f.marks)-1)]
	if m.until <= now || m.seen&seenBit(tag, spec) == 0 {
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
