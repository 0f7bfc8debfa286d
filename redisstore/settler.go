package redisstore

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/scripts"
)

// The settler sends what this store owes Redis after a fault (see the
// charge line, owed_charges.go) for the keys no flush serves, and keeps
// the store's entry in the prefix's set of debtors, so that every store's
// gate (gate.go) waits for the others' charges rather than for a
// guess.
//
// Invariant: while Redis answers, owed keys are sent in back-to-back
// rounds of up to settleStreams pipelines of settleChunk keys each, sent
// at once (beside them, Redis is asked about the doubts of grouped calls:
// see call_groups.go), without pausing between rounds, so a table of
// maxOwedKeys keys settles at Redis's speed (tens of thousands of keys a
// second); while Redis cannot answer, the settler tries every
// chargeRetryMin, backing off to chargeRetryMax, and at once when Redis
// answers a flush (redisAnswered). Every round it renews its
// store's entry in the debtors set (the first listing before the round's
// charges, a renewal beside them), and once it owes nothing it drops it;
// every round it learns whether another store owes (debtors.others). An entry lapses debtorTTL after its last renewal,
// so a store that died owing holds no gate for longer.
//
// It runs while any key owes or is gated, one goroutine a store, and ends
// by itself when none does, or when the store closes: Close then sends
// what is owed itself, until its context ends (close.go).
//
// Proved by TestSettleAtRedisSpeed and TestChargesAcrossInstances.

// How often the settler tries to send the charges of idle keys while Redis
// cannot answer: soon after they are owed, then backing off.
const (
	chargeRetryMin = 20 * time.Millisecond
	chargeRetryMax = 250 * time.Millisecond
)

// settleChunk is how many keys' charges one pipeline carries, and
// settleStreams how many such pipelines the settler sends at once: Redis
// serves its connections in turn, a slice of each one's pipeline a
// round, so a few in flight settle at Redis's speed beside the requests'
// traffic, which goes on meanwhile.
const (
	settleChunk   = 512
	settleStreams = 4
)

// gateSweepEvery is how often, at most, the settler looks over every gate
// for those whose grace has passed while it has charges to send: a
// request's key checks its own gate whenever it comes.
const gateSweepEvery = chargeRetryMin

// debtorTTL is how long a store's entry in the debtors set lives unless
// renewed.
const debtorTTL = 2 * time.Second

// close drops what is still owed and every gate, and owes nothing from
// then on: Close calls it once it has settled what it could (close.go).
func (b *batcher) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	clear(b.owed)
	clear(b.gates)
	b.gated.Store(0)
}

// redisAnswered tells a settler that waits after a failed round that
// Redis answered a flush: it tries again at once rather than at the end
// of its back-off.
func (b *batcher) redisAnswered() {
	select {
	case b.answered <- struct{}{}:
	default:
	}
}

// startRetrierLocked starts the settler unless it runs or the store is
// closing (Close then settles what is owed). b.mu is held.
func (b *batcher) startRetrierLocked() {
	if !b.retrying && !b.closed {
		b.retrying = b.crew.spawn(b.retryCharges)
	}
}

// retryCharges is the settler's loop: it sends the owed charges of keys no
// flush serves, up to settleStreams chunks at a time, until none is owed
// and no key is gated. A key whose line is scheduled is left to its
// flush, which sends the charge ahead of the key's requests.
func (b *batcher) retryCharges() {
	wait := chargeRetryMin
	var swept time.Time
	for {
		stopping := false
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-b.answered:
			case <-b.crew.stopping():
				stopping = true
			}
			t.Stop()
		} else {
			select {
			case <-b.crew.stopping():
				stopping = true
			default:
			}
		}
		b.mu.Lock()
		if len(b.gates) > 0 && (wait > 0 || time.Since(swept) >= gateSweepEvery) {
			b.sweepGatesLocked(b.clock())
			swept = time.Now()
		}
		if stopping || b.closed || len(b.owed) == 0 && len(b.gates) == 0 && !b.debtors.listed() {
			b.retrying = false
			b.mu.Unlock()
			return
		}
		asks := b.takeGroupDoubtsLocked(settleStreams * settleChunk)
		taken := b.takeIdleChargesLocked(settleStreams * settleChunk)
		owes := len(b.owed) > 0
		b.mu.Unlock()
		answered := b.settleRound(b.callContext(), owes, asks, taken)
		switch {
		case !answered:
			wait = min(2*max(wait, chargeRetryMin/2), chargeRetryMax)
		case len(asks) > 0 || len(taken) > 0:
			wait = 0 // more may be owed: the next round at once
		default:
			wait = chargeRetryMin
		}
	}
}

// settleRound tells the debtors set whether this store owes, asks Redis
// about asks' doubts and sends taken's charges, a pipeline per
// settleChunk keys, all at once under ctx; it reports whether Redis
// answered every call. The first listing as a debtor goes before the
// charges, so that no other store misses this one's debts; a renewal goes
// beside them. The settler (retryCharges) and Close (settleAll) send
// their rounds through it.
func (b *batcher) settleRound(ctx context.Context, owes bool, asks []groupAsk, taken []chargeTaken) bool {
	var failed atomic.Bool
	var wg sync.WaitGroup
	do := func(f func() bool) {
		wg.Go(func() {
			if !f() {
				failed.Store(true)
			}
		})
	}
	if owes && !b.debtors.listed() {
		failed.Store(!b.debtors.tell(ctx, owes))
	} else {
		do(func() bool { return b.debtors.tell(ctx, owes) })
	}
	for part := range slices.Chunk(asks, settleChunk) {
		do(func() bool { return b.resolveGroups(ctx, part) })
	}
	for part := range slices.Chunk(taken, settleChunk) {
		do(func() bool { return b.sendCharges(ctx, part) })
	}
	wg.Wait()
	return !failed.Load()
}

// takeIdleChargesLocked takes the owed charges of up to most keys that no
// flush serves and no call carries. b.mu is held.
func (b *batcher) takeIdleChargesLocked(most int) []chargeTaken {
	var taken []chargeTaken
	for k := range b.owed {
		if q := b.queues[k]; q != nil && q.scheduled {
			continue
		}
		if c, ok := b.takeChargeLocked(k); ok {
			if taken = append(taken, c); len(taken) == most {
				break
			}
		}
	}
	return taken
}

// sendCharges sends taken in one pipeline under ctx, grouped
// (settle_groups.go), and settles them; it reports whether all were
// counted. Its failures are not the observer's (see Observer.StoreError):
// it tries again until Redis answers.
func (b *batcher) sendCharges(ctx context.Context, taken []chargeTaken) bool {
	calls, parts := groupedChargeCalls(taken)
	_ = runCalls(ctx, taken[0].key.l.client, calls)
	return b.settleParts(taken, parts)
}

// chargeCalls returns a script call per taken charge, each under its own
// call id, kept for chargeOnceTTL.
func chargeCalls(taken []chargeTaken) []*scriptCall {
	calls := make([]*scriptCall, len(taken))
	for i, c := range taken {
		l := c.key.l
		keys := make([]string, len(l.limits)+1)
		l.keysOf(c.key.key, keys, c.id)
		args := make([]any, 0, 2+len(l.limitArgs))
		args = append(args, chargeList(c.cost))
		args = append(append(args, l.limitArgs...), chargeOnceTTLArg)
		calls[i] = &scriptCall{l: l, keys: keys, args: args, charge: true}
	}
	return calls
}

// chargeList is the scripts' request of a charge of cost: it takes up to
// cost units, what is left when less is.
func chargeList(cost int64) string { return "c" + strconv.FormatInt(cost, 10) }

// debtors is a store's view of the prefix's set of stores that owe
// charges (scripts.Debtors): its own entry, and whether another store owed
// at the last ask. A nil *debtors (a batcher made without a store) does
// nothing.
type debtors struct {
	client  redis.UniversalClient
	key, id string
	timeout time.Duration
	others  atomic.Bool // another store owed at the last answer
	// in: this store's entry may be in the set (the settler's alone).
	in bool
}

var debtorsScript = redis.NewScript(scripts.Debtors)

// newDebtors returns the view of store id on prefix's set.
func newDebtors(client redis.UniversalClient, prefix, id string, timeout time.Duration) *debtors {
	return &debtors{client: client, key: prefix + ":debtors", id: id, timeout: timeout}
}

// listed reports whether this store's entry may still be in the set.
func (d *debtors) listed() bool { return d != nil && d.in }

// othersOwe reports whether another store owed at the last answer.
func (d *debtors) othersOwe() bool { return d != nil && d.others.Load() }

// tell renews this store's entry when it owes, drops it when it does not,
// learns whether others owe, and reports whether Redis answered, waiting
// for Redis at most d.timeout (or until ctx ends).
func (d *debtors) tell(ctx context.Context, owes bool) bool {
	if d == nil {
		return true
	}
	op := "?"
	switch {
	case owes:
		op = "+"
	case d.in:
		op = "-"
	}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	keys, args := debtorsCall(d.key, d.id, op)
	n, err := debtorsScript.Run(ctx, d.client, keys, args...).Int64()
	if owes {
		d.in = true // it may be listed even if the reply was lost
	}
	if err != nil {
		return false
	}
	if !owes {
		d.in = false
	}
	d.others.Store(n > 0)
	return true
}
