package redisstore

import (
	"errors"
	"math"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlimit/redlimit/algorithms"
)

// The charge line: what this process admitted without Redis, owed to it.
//
// Invariant: every request the local twin admits is charged to Redis
// exactly once, and a charge takes no more than Redis itself has left.
// Whatever made a decision local (a deadline, the breaker, a full line, a
// refused connection, a lost reply), the admission is added to its key's
// owed charge under the batcher's lock, in the same critical section as
// the twin's decision, so no call for the key leaves between the two. A
// key's owed units are one number however many requests they stand for,
// sent ahead of the key's next call (in the same pipeline, so Redis counts
// them before it decides the requests in line) or, for a key nobody asks
// for, by the settler (settler.go), which backs off while Redis cannot
// answer. Charges sent for the first time go several keys to a call
// (settle_groups.go); one whose call fails stays owed, as a doubt of its
// group, until the reply Redis kept says whether the call counted it. A
// charge sent again goes alone under its own call id, verbatim: if an
// earlier run did count it, Redis answers from the kept reply (see
// callIDs), which it keeps for chargeOnceTTL.
// A charge is decided by the scripts' charge kind, which takes what is left
// when less than the charge is (never more), so a flood admitted locally
// leaves the key exhausted in Redis rather than over its limit.
//
// Capacity: at most maxOwedKeys keys (WithMaxWaiting's line does
// not hold charges), whatever the number of keys a client sends. A key
// that would need a new entry when the table is full is decided by its
// twin from at most forgottenAllowance units a window, owing nothing
// (decideUnowedLocked): every other client's first request still passes,
// one client's many identities cannot turn the failure mode into a
// refusal for everyone, and such a key is admitted at most L + n over a
// period (L in Redis, forgottenAllowance by each of n instances).
//
// Proved by TestLocalAdmissionsAreCharged (every local path: a paused
// Redis, the breaker open, a full line, a refused connection, a lost reply),
// TestFullChargeTableServesOthers (several times the capacity) and
// TestChargesAcrossInstances (three instances, the five algorithms,
// pause, kill and restart under a flood).

// maxOwedKeys bounds the keys with charges owed to Redis in one
// store: about 100 bytes each.
const maxOwedKeys = 1 << 16

// chargeOnceTTL is how long Redis keeps a charge call's reply, so that a
// charge sent again after a failure counts once: charges are rare (only
// after a fault), so their records may live long enough to span an
// outage's retries.
const chargeOnceTTL = 10 * time.Minute

// chargeOnceTTLArg is a charge call's last argument: negative, so that
// the script always looks for a kept reply (see onceArg), since a charge
// goes under the id of a call that may have run, or again under its own.
var chargeOnceTTLArg = "-" + strconv.FormatInt(chargeOnceTTL.Milliseconds(), 10)

// owedCharge is what one key owes Redis.
type owedCharge struct {
	cost  int64  // admitted locally, not yet sent
	doubt int64  // sent under id: whether Redis counted it is unknown
	id    uint64 // the call id doubt goes under, every time it is sent
	// in: doubt stands for a request of a call that decided several keys,
	// which the settler asks Redis about before charging (see resolveGroups).
	in   callGroup
	busy bool // a call carries doubt now, or the settler asks about it
}

// callGroup names a key's part in a call that decided several keys: the
// key that keeps the call's reply, and the key's place among the reply's
// groups. The zero value names none.
type callGroup struct {
	once  string
	group int
	// charge: the call was the settler's grouped charge (settle_groups.go),
	// which counted the key's part if it ran and the part is no error.
	charge bool
}

// callDoubt says how to charge what the twin admits in place of a request
// whose call failed (see doubtOf): id 0, charge it; noCharge, not at all;
// another id, charge it unless that call counted it: by sending the charge
// under the call's id, or, for a call of several keys (in), by asking
// Redis for the call's kept reply first.
type callDoubt struct {
	id uint64
	in callGroup
}

// chargeTaken is an owed charge taken for one call.
type chargeTaken struct {
	key  queueKey
	id   uint64
	cost int64
	// fresh: never sent before, so it may go in a call of several keys
	// under that call's id rather than its own.
	fresh bool
}

// chargeLocked adds cost to the charge key owes. It reports false when
// the key has no entry and the table is full, unless force says the
// admission was made already (its charge is then kept beyond the bound:
// at most one per request in flight). b.mu is held.
//
// doubt says what the admission's own call may have done (see callDoubt).
func (b *batcher) chargeLocked(key queueKey, cost int, force bool, doubt callDoubt) bool {
	if doubt == noCharge || b.closed {
		return true // a closed store owes nothing more: nothing would send it
	}
	o := b.owed[key]
	if o == nil {
		if !force && len(b.owed) >= b.maxOwed {
			return false
		}
		o = &owedCharge{}
		b.owed[key] = o
	}
	switch {
	case doubt.id != 0 && !o.busy && (o.doubt == 0 || o.id == doubt.id && o.in == doubt.in):
		o.doubt += int64(cost)
		o.id, o.in = doubt.id, doubt.in
	default:
		// Not sent under its call's id: charged whatever that call did,
		// which errs on the strict side.
		o.cost += int64(cost)
	}
	b.startRetrierLocked()
	return true
}

// noCharge is the doubt of an admission whose own call may have counted it
// and cannot be asked (it carried no id).
var noCharge = callDoubt{id: math.MaxUint64}

// doubtOf says, for a call that failed with err, how to charge what the
// twin admits in its stead: id 0 (charge it) when the call never reached
// Redis or Redis refused it; else, when it may have run, its id and in
// (charge it unless it ran), or noCharge when it carried no id.
func doubtOf(err error, id uint64, in callGroup) callDoubt {
	var opErr *net.OpError
	var redisErr redis.Error
	switch {
	case errors.As(err, &redisErr), errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &opErr) && opErr.Op == "dial":
		return callDoubt{}
	case id != 0:
		return callDoubt{id: id, in: in}
	}
	return noCharge
}

// roomLocked reports whether key may owe a charge. b.mu is held.
func (b *batcher) roomLocked(key queueKey) bool {
	return b.owed[key] != nil || len(b.owed) < b.maxOwed
}

// takeChargeLocked takes key's owed charge for a call, if it has one, no
// call carries it already, and Redis need not be asked about it first
// (see resolveGroups). b.mu is held.
func (b *batcher) takeChargeLocked(key queueKey) (chargeTaken, bool) {
	o := b.owed[key]
	if o == nil || o.busy || o.doubt > 0 && o.in != (callGroup{}) {
		return chargeTaken{}, false
	}
	fresh := o.doubt == 0
	if fresh {
		o.doubt, o.cost, o.id = o.cost, 0, key.l.guard.ids.id()
	}
	o.busy = true
	return chargeTaken{key: key, id: o.id, cost: o.doubt, fresh: fresh}, true
}

// doubtSettledLocked records that key's doubt is settled (counted, or
// turned into a charge): an entry that owes nothing more goes, and the
// key's gate starts its grace. b.mu is held.
func (b *batcher) doubtSettledLocked(key queueKey, o *owedCharge) {
	o.doubt, o.id, o.in = 0, 0, callGroup{}
	if o.cost == 0 {
		delete(b.owed, key)
		b.ungateLaterLocked(key, b.clock())
	}
}

// forgetCharge drops what key owes, unless a call carries it now: a reset
// key starts afresh in Redis, and a charge for what was admitted before
// would take from its new quota.
func (b *batcher) forgetCharge(l *redisLimiter, key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := queueKey{l, key}
	if o := b.owed[id]; o != nil && !o.busy {
		delete(b.owed, id)
	}
}

// ownsChargeLocked reports whether key owes a charge. b.mu is held.
func (b *batcher) ownsChargeLocked(key queueKey) bool { return b.owed[key] != nil }

// decideAndCharge decides a request of cost for key locally with decide
// (the twin's decision: twinDecides) and, when it admits it, adds cost to the key's owed
// charge (doubt: see chargeLocked) and gates the key (see gate.go),
// all under b.mu (see the charge line's invariant above).
func (b *batcher) decideAndCharge(l *redisLimiter, key string, cost int, doubt callDoubt, decide func() (algorithms.Result, error)) (algorithms.Result, error) {
	return b.admitLocally(l, key, cost, decide, func(id queueKey) {
		b.chargeLocked(id, cost, false, doubt)
	})
}

// admitLocally runs decide, the twin's decision of a request of cost for
// key, under b.mu and, for an admission, owe under the same lock; it gates
// the key whatever decide says (see gate.go). A key that cannot owe
// (the table is full) is decided by decideUnowedLocked instead.
func (b *batcher) admitLocally(l *redisLimiter, key string, cost int, decide func() (algorithms.Result, error), owe func(queueKey)) (algorithms.Result, error) {
	id := queueKey{l, key}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.roomLocked(id) {
		return l.decideUnowedLocked(key, cost)
	}
	res, err := decide()
	if err != nil || res.Decider != algorithms.DecidedLocally {
		return res, err
	}
	if res.Allowed {
		owe(id)
	}
	b.gateLocked(id) // after owe: a key that owes is gated until it is paid
	return res, nil
}

// decideUnowedLocked is the twin's decision of a request for a key the
// charge table has no room for, owing Redis nothing, and of one this
// process had no room to send (localSaturated): from at most
// forgottenAllowance units (per window of the twin). However many keys
// fill the table, every other key's first request so passes, and a key's
// local admissions stay within the limit's bound L + n (see the invariant
// above). b.mu is held.
func (l *redisLimiter) decideUnowedLocked(key string, cost int) (algorithms.Result, error) {
	if !l.guard.batcher.gatedLocked(queueKey{l, key}, l.guard.clock()) {
		l.startFromRedis(key)
	}
	l.capTwin(key, forgottenAllowance)
	return l.twinOnly(key, cost)
}

// Outcomes of a sent call, as its abandoned waiters learn them.
const (
	outcomeUnknown int8 = iota
	outcomeAdmitted
	outcomeNotCounted // failed or denied: Redis did not count the request
)

// decideSent decides locally the request of a waiter that was sent but
// not answered in time. Its call may yet count it in Redis: the charge is
// owed only once the call turns out not to have (see learnOutcome).
func (b *batcher) decideSent(l *redisLimiter, key string, w *waiter, decide func() (algorithms.Result, error)) (algorithms.Result, error) {
	return b.admitLocally(l, key, w.cost, decide, func(id queueKey) {
		switch w.outcome {
		case outcomeUnknown:
			w.localCost = w.cost
		case outcomeNotCounted:
			b.chargeLocked(id, w.cost, false, w.doubt)
		}
	})
}

// learnOutcome tells the abandoned waiters of a finished call whether
// Redis counted them, and charges those the twin admitted meanwhile that
// Redis did not count.
func (b *batcher) learnOutcome(l *redisLimiter, key string, ws []*waiter, counted []bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, w := range ws {
		w.outcome = outcomeNotCounted
		if counted[i] {
			w.outcome = outcomeAdmitted
			continue
		}
		if w.localCost > 0 {
			b.chargeLocked(queueKey{l, key}, w.localCost, true, w.doubt)
		}
	}
}
