package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// job is one key's share of a flush: its waiters, and what its script call
// needs and returns.
type job struct {
	l       *redisLimiter
	key     string
	live    []*waiter // the waiters sent, in arrival order
	costs   []int
	list    string // the requests as the script's list, in the stead of costs (see listOf)
	results []algorithms.Result
	err     error
	id      uint64    // the call's id, when it carried one
	in      callGroup // the job's part of a call of several keys

	// The storage of costs and results for a key with one request, the
	// common case: no allocation of their own.
	costBuf   [1]int
	resultBuf [1]algorithms.Result
}

// flushAll decides the batches of several keys, each in one script call,
// all sent in one pipeline: a round trip and a read for many keys, which is
// what most of Redis's work per decision is. Each key keeps its own answer,
// error and cached denial; the breaker hears of the round trip once. An
// inline flush (see flushInline) ends by its waiters' deadline.
func flushAll(g *guard, buf *flushBuf, inline bool) {
	sent := g.clock()
	probe := false
	deadline := sent
	batches := buf.batches
	if cap(buf.slab) < len(batches) {
		buf.slab = make([]job, len(batches))
	}
	jobs, slab := buf.jobs[:0], buf.slab[:len(batches)]
	var charges []chargeTaken
	for n, kb := range batches {
		if kb.charge.cost > 0 {
			charges = append(charges, kb.charge)
		}
		if len(kb.waiters) == 0 {
			continue
		}
		probe = probe || kb.probe
		j := &slab[n]
		if !kb.l.prepare(j, kb.key, kb.waiters, sent) {
			continue
		}
		for _, w := range j.live {
			if w.deadline.After(deadline) {
				deadline = w.deadline
			}
		}
		jobs = append(jobs, j)
	}
	buf.jobs = jobs
	if len(jobs) == 0 && len(charges) == 0 {
		if probe {
			g.breaker.CancelProbe()
		}
		return
	}
	// The calls may outlive their waiters' deadline: they are then decided
	// locally, but the calls go on, so that a connection is not torn down
	// for a late reply. Calls that cannot end by callTimeout have failed.
	// On a client that does not end a call at its context's deadline, the
	// breaker hears of a late call at the waiters' deadline (lateCall).
	var late *lateCall
	if !inline {
		if !g.inline {
			late = newLateCall(g, buf.qs, deadline.Sub(sent), probe)
		}
		deadline = deadline.Add(g.callTimeout())
	}
	health := run(g.wheel.contextFor(deadline.Sub(sent)), jobs, charges)
	// An error reply (OOM, say) is Redis answering: the key is decided
	// locally, but the breaker, which keeps every key away from Redis,
	// opens only for a Redis that cannot be reached or does not answer.
	answered := health == nil || classify(health) == ErrorScript
	if late.endedFirst() || answered {
		g.breaker.Record(g.clock(), answered, probe)
	}
	if health == nil {
		g.batcher.redisAnswered()
	}
	for _, j := range jobs {
		j.l.finish(j, sent)
	}
}

// keyBatch is one key's waiters taken for a flush.
type keyBatch struct {
	l       *redisLimiter
	key     string
	waiters []*waiter
	probe   bool        // a waiter is the breaker's probe
	charge  chargeTaken // the key's owed charge, sent first; none when its cost is 0
}

// prepare answers the waiters the denial cache now covers (a denial in the
// previous call) and fills j for the rest; it reports false if none is
// left.
func (l *redisLimiter) prepare(j *job, key string, batch []*waiter, sent time.Time) bool {
	live := batch[:0]
	for _, w := range batch {
		if res, ok := l.guard.denials.lookup(l, key, w.cost, sent); ok {
			w.deliver(res, nil)
			continue
		}
		live = append(live, w)
	}
	if len(live) == 0 {
		return false
	}
	costs := j.costBuf[:0]
	if len(live) > len(j.costBuf) {
		costs = make([]int, 0, len(live))
	}
	for _, w := range live {
		costs = append(costs, w.cost)
	}
	j.l, j.key, j.live, j.costs = l, key, live, costs
	j.id, j.in = 0, callGroup{}
	return true
}

// run sends the jobs' script calls: alone as a plain call, the others
// grouped into as few calls as the client's sharding allows (see callsOf),
// and those calls in one pipeline, after the calls of the owed charges
// (grouped as the settler groups them, settle_groups.go), which Redis
// thus counts before it decides the jobs. It returns the error that
// says most about Redis's health: nil when Redis answered every call, even
// with an error reply.
func run(ctx context.Context, jobs []*job, charges []chargeTaken) error {
	if len(jobs) == 1 && len(charges) == 0 {
		return jobs[0].l.callAlone(ctx, jobs[0], true)
	}
	var calls []*scriptCall
	var parts []chargePart
	if len(charges) > 0 {
		calls, parts = groupedChargeCalls(charges)
	}
	if len(jobs) > 0 {
		calls = append(calls, callsOf(jobs)...)
	}
	b := calls[0].l.guard.batcher
	health := runCalls(ctx, calls[0].l.client, calls)
	if len(charges) > 0 {
		b.settleParts(charges, parts)
	}
	return health
}

// finish delivers a job's answers, or its error, and remembers a denial.
func (l *redisLimiter) finish(j *job, sent time.Time) {
	g := l.guard
	if j.err != nil {
		g.reloadSlots()
		g.reportError(j.err, sent)
		// Whether the call ran is unknown unless it never left: what the
		// twin admits is then charged unless the call ran (see doubtOf).
		doubt := doubtOf(j.err, j.id, j.in)
		err := j.err
		if errors.Is(err, context.Canceled) && g.refusedSince(sent) {
			err = fmt.Errorf("%w (%w)", errRefused, err) // ended by expireAll: say why
		}
		if doubt.id != 0 && doubt != noCharge && len(j.costs) > 1 {
			// A call of several requests keeps its reply when it admitted
			// any of them, so a charge under its id would be swallowed for
			// those it denied: charge them all, the strict side.
			doubt = callDoubt{}
		}
		var gone []*waiter
		for _, w := range j.live {
			w.doubt = doubt
			if !w.deliver(algorithms.Result{}, err) {
				gone = append(gone, w)
			}
		}
		if len(gone) > 0 {
			g.batcher.learnOutcome(l, j.key, gone, make([]bool, len(gone)))
		}
		return
	}
	var out delivery
	if !g.batcher.deliverGated(j, sent, &out) { // see gate.go
		l.deliver(j, false, &out)
	}
	if len(out.gone) > 0 {
		g.batcher.learnOutcome(l, j.key, out.gone, out.counted)
	}
	if out.denied >= 0 {
		// The denial of the smallest cost: it covers the most.
		g.denials.remember(l, j.key, j.costs[out.denied], sent, j.results[out.denied])
	}
	g.said.remember(l, j.key, sent, j.results[len(j.live)-1])
}

// delivery is what delivering a job's answers leaves to do: the waiters
// that had given up (gone) and whether Redis counted each, and the denial
// to remember (denied, an index of the job's requests; -1 for none).
type delivery struct {
	denied  int
	gone    []*waiter
	counted []bool
}

// deliver hands each of j's waiters its answer, or, when gated, the twin's
// for an admission (see gate.go; b.mu is then held), and fills out.
// A waiter is not touched once delivered: its owner may reuse it.
func (l *redisLimiter) deliver(j *job, gated bool, out *delivery) {
	out.denied = -1
	for i, w := range j.live {
		res := j.results[i]
		if !res.Allowed && (out.denied < 0 || j.costs[i] < j.costs[out.denied]) {
			out.denied = i
		}
		if gated && res.Allowed {
			res = l.throughGate(j.key, j.costs[i])
		}
		if !w.deliver(res, nil) {
			out.gone, out.counted = append(out.gone, w), append(out.counted, j.results[i].Allowed)
		}
	}
}
