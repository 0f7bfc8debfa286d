package redisstore

import (
	"context"
	"sync"
	"time"
)

// batcher queues the Redis store's decisions per limiter and key, and runs
// at most maxActive flushers, each sending one script call at a time. While a
// key's call is in flight its new requests wait, and the next call decides
// them together (up to maxBatch) in arrival order: a flood of one key costs
// Redis one call per round trip, however many requests it holds. A store
// that is idle sends at once: nothing waits for a batch to fill.
type batcher struct {
	maxActive, maxWaiting, maxBatch int
	maxKeys                         int // keys flushed in one pipeline

	mu      sync.Mutex
	queues  map[queueKey]*keyQueue
	ready   []*keyQueue // keys with waiters and no flusher, oldest first
	free    []*keyQueue // queues of keys flushed empty, for reuse
	active  int         // flushers running
	waiting int         // waiters queued, all keys

	// What the store owes Redis after a fault, and the gates it holds
	// (see ledger), guarded by mu: the twin's decision and the debt it
	// creates change together, and a key's charge leaves with its waiters.
	ledger

	clock func() time.Time // the store's
	crew  *crew            // the store's goroutines (crew.go)
	// callContext returns a context for one call of the settler's, ending
	// a call timeout from now, or at once when the store closes.
	callContext func() context.Context

	// Flushers that have nothing to do, and the keys handed to them (see
	// start).
	idle    int
	handoff chan *keyQueue
}

type queueKey struct {
	l   *redisLimiter
	key string
}

// keyQueue holds one key's waiters. scheduled is set while the key is in
// ready or being flushed, so that one key has at most one call in flight.
type keyQueue struct {
	id        queueKey
	waiters   []*waiter
	scheduled bool
	late      bool // the key's call in flight is late (late_call.go)
}

// newBatcher returns a batcher of these bounds (see batcher).
func newBatcher(maxActive, maxWaiting, maxBatch, maxKeys int) *batcher {
	return &batcher{maxActive: maxActive, maxWaiting: maxWaiting, maxBatch: maxBatch, maxKeys: maxKeys,
		queues: map[queueKey]*keyQueue{}, ledger: newLedger(), clock: time.Now, handoff: make(chan *keyQueue, maxActive)}
}

// submit queues w for key of l. It reports false, queuing nothing, when
// maxWaiting decisions already wait. It returns a queue when a flusher is
// free and none serves the key yet: the caller then starts one for it, or
// flushes it itself (see flushInline).
func (b *batcher) submit(l *redisLimiter, key string, w *waiter) (*keyQueue, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiting >= b.maxWaiting {
		return nil, false
	}
	b.waiting++
	q := b.queueLocked(l, key)
	q.waiters = append(q.waiters, w)
	return b.scheduleLocked(q), true
}

// queueLocked returns key's queue, made (or reused) if it has none. b.mu
// is held.
func (b *batcher) queueLocked(l *redisLimiter, key string) *keyQueue {
	id := queueKey{l, key}
	q := b.queues[id]
	if q == nil {
		if n := len(b.free); n > 0 {
			q, b.free[n-1] = b.free[n-1], nil
			b.free = b.free[:n-1]
			q.id = id
		} else {
			q = &keyQueue{id: id}
		}
		b.queues[id] = q
	}
	return q
}

// Bounds of the queues kept for reuse: a queue is one allocation and its
// line another for every key flushed, most keys having one request at a
// time.
const (
	maxFreeQueues = 1024
	maxFreeLine   = 64 // longer lines are left to the collector
)

// scheduleLocked schedules q, which has waiters, unless it is already: it
// returns q when a flusher is free to serve it, and otherwise puts it in
// the ready line. b.mu is held.
func (b *batcher) scheduleLocked(q *keyQueue) *keyQueue {
	if q.scheduled {
		return nil
	}
	q.scheduled = true
	if b.active < b.maxActive {
		b.active++
		return q
	}
	b.ready = append(b.ready, q)
	return nil
}

// flushInline flushes q on the caller's goroutine, a call bounded by its
// waiter's own deadline, and hands whatever became ready meanwhile to a
// flusher of its own. It spares an idle store's decision two goroutine
// hand-offs; it is used only with clients that honour a context's deadline.
// It sends the caller's waiter alone (the first of a key that had none): a
// request that joined the key meanwhile may have a later deadline, which
// would hold the caller past its own.
//
// A key that owes a charge is flushed by a flusher instead, which sends
// the charge ahead of the request: a charge needs a call's full time, not
// what is left of one request's deadline.
func (b *batcher) flushInline(q *keyQueue) {
	g := q.id.l.guard
	b.mu.Lock()
	owes := b.ownsChargeLocked(q.id)
	b.mu.Unlock()
	if owes {
		b.start(q)
		return
	}
	buf := flushBufs.Get().(*flushBuf)
	var probe bool
	buf.waiters, probe, _ = b.take(q, g.clock(), 1, false, buf.waiters)
	if len(buf.waiters) > 0 {
		buf.batches = append(buf.batches, keyBatch{l: q.id.l, key: q.id.key, waiters: buf.waiters, probe: probe})
		flushAll(g, buf, true)
	}
	buf.qs = append(buf.qs, q)
	n := b.next(buf.qs, false)
	buf.reset()
	flushBufs.Put(buf)
	if n != nil {
		b.start(n)
	}
}

// flusherLinger is how long a flusher with nothing to do waits for a key
// before it ends. A busy store so keeps its flushers, whose stacks have
// grown to what a call needs, instead of starting a goroutine (and growing
// its stack) for every flush; an idle one keeps none.
const flusherLinger = 100 * time.Millisecond

// start has a flusher serve q, for which the caller took a flusher's slot
// (see scheduleLocked): one waiting idle, else a new one.
func (b *batcher) start(q *keyQueue) {
	b.mu.Lock()
	if b.idle > 0 {
		select {
		case b.handoff <- q: // room for every flusher: never blocks
			b.idle--
			b.mu.Unlock()
			return
		default:
		}
	}
	b.mu.Unlock()
	b.crew.spawn(func() { b.flusher(q) }) // closed: q's waiters give up at their (closed) deadlines
}

// flusher serves q and then the keys start hands it, until none comes
// within flusherLinger. The batcher counts it idle from the moment it finds
// nothing ready (see next), so a key handed to it is always taken: by it,
// or by another idle flusher, which leaves this one counted idle.
func (b *batcher) flusher(q *keyQueue) {
	wheel := q.id.l.guard.wheel
	buf := flushBufs.Get().(*flushBuf)
	defer flushBufs.Put(buf)
	for q != nil {
		b.run(q, buf)
		select {
		case q = <-b.handoff:
			continue
		case <-wheel.after(flusherLinger):
		}
		b.mu.Lock()
		select {
		case q = <-b.handoff:
		default:
			b.idle--
			q = nil
		}
		b.mu.Unlock()
	}
}

// run flushes q with the keys ready meanwhile, up to maxKeys of them in
// one pipeline, then whatever is ready next, until nothing is.
func (b *batcher) run(q *keyQueue, buf *flushBuf) {
	g := q.id.l.guard
	for q != nil {
		buf.qs = b.gather(q, buf.qs)
		now := g.clock()
		for _, q := range buf.qs {
			from := len(buf.waiters)
			var probe bool
			var charge chargeTaken
			buf.waiters, probe, charge = b.take(q, now, b.maxBatch, true, buf.waiters)
			if w := buf.waiters[from:len(buf.waiters):len(buf.waiters)]; len(w) > 0 || charge.cost > 0 {
				buf.batches = append(buf.batches, keyBatch{l: q.id.l, key: q.id.key, waiters: w, probe: probe, charge: charge})
			}
		}
		if len(buf.batches) > 0 {
			flushAll(g, buf, false)
		}
		q = b.next(buf.qs, true)
		buf.reset()
	}
}

// gather appends q and up to maxKeys-1 more keys from the front of the
// ready line, all now this flusher's, to qs.
func (b *batcher) gather(q *keyQueue, qs []*keyQueue) []*keyQueue {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(len(b.ready), b.maxKeys-1)
	qs = append(qs, q)
	qs = append(qs, b.ready[:n]...)
	b.ready = dropFront(b.ready, n)
	return qs
}

// dropFront removes the first n keys of line, moving the rest down, so that
// the line's storage serves for good instead of being given up from the
// front and made anew as keys are appended.
func dropFront(line []*keyQueue, n int) []*keyQueue {
	rest := copy(line, line[n:])
	clear(line[rest:])
	return line[:rest]
}

// take moves up to most waiters from q to sent, marking them sent,
// dropping those that were abandoned meanwhile, and, when withCharge says
// so, takes the key's owed charge, all under one lock: a charge the twin
// added before is sent ahead of these waiters (see owed_charges.go). A
// waiter whose deadline is too close for a round trip is not sent but left
// to give up by itself: it waited in this process, which is no failure of
// Redis. probe reports whether a waiter sent is the breaker's probe.
func (b *batcher) take(q *keyQueue, now time.Time, most int, withCharge bool, sent []*waiter) (_ []*waiter, probe bool, charge chargeTaken) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if withCharge {
		charge, _ = b.takeChargeLocked(q.id)
	}
	n := min(len(q.waiters), most)
	for _, w := range q.waiters[:n] {
		if w.deadline.Sub(now) < minRoundTrip {
			// Out of the line now: its owner decides it by itself.
			w.state.CompareAndSwap(waiterQueued, waiterDropped)
			continue
		}
		if w.state.CompareAndSwap(waiterQueued, waiterSent) {
			sent = append(sent, w)
			probe = probe || w.probe
		}
	}
	rest := copy(q.waiters, q.waiters[n:])
	clear(q.waiters[rest:])
	q.waiters = q.waiters[:rest]
	b.waiting -= n
	return sent, probe, charge
}

// flushBuf is the storage of a flush, kept by a flusher from one flush to
// the next (and pooled for inline flushes): a flush of many keys allocates
// nothing per key for its lines, batches and jobs.
type flushBuf struct {
	qs      []*keyQueue
	batches []keyBatch
	waiters []*waiter // the batches' waiters, one stretch each
	jobs    []*job
	slab    []job // the jobs
}

var flushBufs = sync.Pool{New: func() any { return new(flushBuf) }}

// reset empties buf, keeping nothing alive that its flush held.
func (buf *flushBuf) reset() {
	clear(buf.qs)
	clear(buf.batches)
	clear(buf.waiters)
	clear(buf.jobs)
	clear(buf.slab)
	buf.qs, buf.batches, buf.waiters, buf.jobs = buf.qs[:0], buf.batches[:0], buf.waiters[:0], buf.jobs[:0]
}

// next returns the key the flusher that just flushed qs serves next: the
// oldest ready key, with those of qs that have more waiters going to the
// back of the line; nil when nothing is left: the flusher's slot is then
// free, and the flusher idle if it is one (not an inline flush).
func (b *batcher) next(qs []*keyQueue, flusher bool) *keyQueue {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, q := range qs {
		if len(q.waiters) == 0 {
			q.scheduled = false
			delete(b.queues, q.id)
			if len(b.free) < maxFreeQueues && cap(q.waiters) <= maxFreeLine {
				q.id = queueKey{}
				b.free = append(b.free, q)
			}
		} else {
			b.ready = append(b.ready, q)
		}
	}
	if len(b.ready) == 0 {
		b.active--
		if flusher {
			b.idle++
		}
		return nil
	}
	n := b.ready[0]
	b.ready = dropFront(b.ready, 1)
	return n
}
