package redisstore

import (
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// The gate after a fault: Redis's admissions held to the twin's until
// every instance's charges can have landed.
//
// Invariant: once this instance has decided a key locally (admitted or
// refused), while it owes Redis a charge for the key, for gateGrace after
// its charges were counted (or after its last local decision, when it
// owes nothing), and after that while another store on the prefix lists
// itself as a debtor (see settler.go; at most gateOthersMax more), a
// request Redis admits for the key is admitted only if the local twin
// admits it too. Other instances' charges for the key reach Redis on
// their own schedule (their next call for it, or their settler, which
// lists them as debtors within chargeRetryMax of Redis answering and
// drains at Redis's speed); until they have, Redis would admit again what
// their twins admitted during the fault. Held to its twin, each instance admits no more than its share
// across the fault and the grace, so a fault seen alike by every instance
// admits at most the limit (plus one per instance from rounding, plus what
// a restarted server forgot). A request Redis counted and the gate refused
// stays counted: the strict side. An instance that made no local decision
// for the key is not gated, so with traffic that reaches only some
// instances during a fault, the bound is the limit plus the twin shares of
// those instances whose charges are still on their way.
//
// It costs a decision nothing while no key is gated (one atomic load), and
// the twin's decision while one is. At most maxOwedKeys keys are
// gated at once; beyond that a key is not gated, as the charge table
// refuses a key it has no room for.
//
// Proved by TestChargesAcrossInstances and TestGateWaitsForOtherDebtors.

// gateGrace is how long a key stays gated after this instance's charges
// for it were counted: time for the other instances, whose settlers try at
// least every chargeRetryMax, to have listed themselves as debtors.
const gateGrace = 2 * chargeRetryMax

// gateOthersMax is how much longer than its grace a key stays gated while
// other stores list themselves as debtors: their charges land at Redis's
// speed, and a store whose charges keep failing must not gate the others
// for good.
const gateOthersMax = 10 * time.Second

// gateLocked gates key until its charges are counted (and gateGrace
// more); a key that owes nothing (its admission's own call may have
// counted it) for gateGrace from now. b.mu is held.
func (b *batcher) gateLocked(key queueKey) {
	if b.closed {
		return // nothing is owed, nothing will land
	}
	if _, ok := b.gates[key]; !ok {
		if len(b.gates) >= b.maxOwed {
			return // bounded as the charges are: see the note above
		}
		b.gated.Add(1)
	}
	until := time.Time{} // while owed
	if b.owed[key] == nil {
		until = b.clock().Add(gateGrace)
	}
	b.gates[key] = until
	b.startRetrierLocked() // which also sweeps the gates
}

// ungateLaterLocked starts key's grace: its charges were counted at now.
// b.mu is held.
func (b *batcher) ungateLaterLocked(key queueKey, now time.Time) {
	if _, ok := b.gates[key]; ok {
		b.gates[key] = now.Add(gateGrace)
	}
}

// gatedLocked reports whether key is gated at now, dropping a gate whose
// grace has passed. b.mu is held.
func (b *batcher) gatedLocked(key queueKey, now time.Time) bool {
	until, ok := b.gates[key]
	if !ok {
		return false
	}
	if until.IsZero() {
		if b.owed[key] != nil {
			return true
		}
		// What it owed was dropped (a reset): its grace starts now.
		until = now.Add(gateGrace)
		b.gates[key] = until
	}
	if now.Before(until) || b.debtors.othersOwe() && now.Before(until.Add(gateOthersMax)) {
		return true
	}
	delete(b.gates, key)
	b.gated.Add(-1)
	return false
}

// sweepGatesLocked drops the gates whose grace has passed. b.mu is held.
func (b *batcher) sweepGatesLocked(now time.Time) {
	for key := range b.gates {
		b.gatedLocked(key, now)
	}
}

// deliverGated delivers j's answers (see deliver) under b.mu, with the
// twin's say over each admission, if j's key is gated at now, and reports
// whether it did; it holds nothing when it returns. Nothing is locked
// while no key is gated.
func (b *batcher) deliverGated(j *job, now time.Time, out *delivery) bool {
	if b.gated.Load() == 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.gatedLocked(queueKey{j.l, j.key}, now) {
		return false
	}
	j.l.deliver(j, true, out)
	return true
}

// throughGate is the answer to a request Redis admitted while its key is
// gated: the twin's. b.mu is held.
func (l *redisLimiter) throughGate(key string, cost int) algorithms.Result {
	res, err := l.twinOnly(key, cost)
	if err != nil {
		return l.uncounted(false, algorithms.DecidedLocally)
	}
	return res
}
