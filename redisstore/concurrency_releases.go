package redisstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/pause"
)

// The release line: leases of concurrency limits that Redis may hold and
// nobody will release there, removed once Redis answers.
//
// Invariant: a lease Redis may hold after a fault leaves Redis once Redis
// answers again, and no copy of its Acquire's call grants it after that.
// Whatever made it doubtful (an Acquire's call that failed after it may
// have run, an Acquire that gave up waiting for its call, a Release that
// could not reach Redis or was not sent while the breaker was open: that
// Release still returns its error), the lease goes into the line, and a
// goroutine of the store sends its release, backing off from
// releaseRetryMin to releaseRetryMax while Redis does not answer, and in
// pipelined batches of up to releaseBatch leases, one after the other,
// once it does, until Redis has answered each. A release from the line
// sets the lease's tombstone before it removes the lease; the acquire
// script grants no lease whose tombstone exists, so a copy of the call
// (go-redis sends a call again when its reply is lost, and a frozen Redis
// runs what waited in its input once it resumes) grants nothing after the
// release. The tombstone lives onceTTL (see once.go): a copy is sent
// within half of it after the call, and a Redis that runs the release
// reads at once what waits in its input. A Release of a lease Redis
// granted sets the tombstone too when the Acquire's call was written more
// than once (memberArg), and is one ZREM otherwise. A call never written
// (no connection) is dropped from the line: Redis holds nothing of it.
//
// Memory is bounded: at most maxReleases leases, about 150 bytes
// each plus the key (10 MB with keys of 12 bytes). When the line is full,
// an Acquire whose lease Redis may hold is refused locally under FailLocal
// (FailOpen admits and FailClosed refuses as ever), a tighter limit rather
// than a request admitted beside a lease that no one gives back; a Release
// that cannot reach Redis leaves its lease to expire after the lease
// duration. Store.Close stops the line's goroutine and then sends what
// the line holds itself, until its context ends (drain); from then on the
// line takes nothing: a lease Redis may hold then expires there.
//
// Proved by TestConcurrencyLeasesReleasedAfterFault (limit 1, 20 clients
// in flight while Redis is paused or frozen a second, three go-redis
// clients), TestConcurrencyResendAfterRelease (a copy of the call after
// the release grants nothing; a lease whose call was written once is
// released with one ZREM), TestReleaseLineFull, TestReleaseLineClose,
// TestReleaseLineBatchesAndBackoff, TestReleaseLineAdd and
// TestCloseSettlesOwed.

// maxReleases bounds the leases a Redis store holds to release from
// Redis after a fault (see the release line).
const maxReleases = 1 << 16

const (
	releaseBatch    = 128 // leases per pipeline: two commands each
	releaseRetryMin = 20 * time.Millisecond
	releaseRetryMax = 250 * time.Millisecond
)

// queued says what became of a lease given to the release line.
type queued int8

const (
	queuedOK     queued = iota // its release is sent until Redis answers it
	queuedFull                 // the line is full: not queued
	queuedClosed               // the store is closed: not queued
	queuedNone                 // not given: Redis holds no lease of the call
)

// releaseLine holds the leases to release from Redis and runs the
// goroutine that sends their releases while it holds any.
type releaseLine struct {
	client   redis.UniversalClient
	tombTTL  time.Duration // how long a tombstone lives: onceTTL
	attempt  time.Duration // the longest one batch waits for Redis
	capacity int

	mu      sync.Mutex
	owed    map[redisLease]struct{}
	running bool // the goroutine runs; it stops when owed is empty
	closed  bool

	ctx    context.Context // canceled by stop
	cancel context.CancelFunc
	crew   *crew // the store's goroutines, which Close waits for
}

func newReleaseLine(client redis.UniversalClient, tombTTL, attempt time.Duration, c *crew) *releaseLine {
	ctx, cancel := context.WithCancel(context.Background())
	return &releaseLine{client: client, tombTTL: tombTTL, attempt: attempt, capacity: maxReleases,
		owed: map[redisLease]struct{}{}, ctx: ctx, cancel: cancel, crew: c}
}

// add queues h for release, starting the goroutine unless it runs. A lease
// already queued is queued once.
func (r *releaseLine) add(h redisLease) queued {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return queuedClosed
	}
	if _, ok := r.owed[h]; ok {
		return queuedOK
	}
	if len(r.owed) >= r.capacity {
		return queuedFull
	}
	r.owed[h] = struct{}{}
	if !r.running {
		r.running = r.crew.spawn(r.run) // not when the store closes: Close drains the line
	}
	return queuedOK
}

// drop forgets h, whose Acquire's call was never written: Redis holds no
// lease of it.
func (r *releaseLine) drop(h redisLease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.owed, h)
}

// stop makes the line take nothing more and its goroutine return (the
// store's crew waits for it); what the line holds stays, for drain.
func (r *releaseLine) stop() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
}

// drain sends the releases the line holds, on the caller's goroutine, once
// stop's goroutines have returned, trying again while Redis does not
// answer, until none is left or ctx ends; it then drops what is left and
// returns how many leases that was.
func (r *releaseLine) drain(ctx context.Context) int {
	wait := time.Duration(0)
	for {
		_ = pause.For(ctx, wait) // an ended ctx is seen below
		batch := r.held(releaseBatch)
		if len(batch) == 0 || ctx.Err() != nil {
			return r.dropAll()
		}
		attempt, cancel := context.WithTimeout(ctx, r.attempt)
		answered := r.sendNow(attempt, batch)
		cancel()
		r.settle(answered)
		if len(answered) == len(batch) {
			wait = 0
		} else {
			wait = min(max(2*wait, releaseRetryMin), releaseRetryMax)
		}
	}
}

// held returns up to most of the leases the line holds.
func (r *releaseLine) held(most int) []redisLease {
	r.mu.Lock()
	defer r.mu.Unlock()
	var batch []redisLease
	for h := range r.owed {
		if batch = append(batch, h); len(batch) == most {
			break
		}
	}
	return batch
}

// dropAll forgets what the line holds and returns how many leases that was.
func (r *releaseLine) dropAll() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.owed)
	clear(r.owed)
	return n
}

// run sends the queued releases until none is left.
func (r *releaseLine) run() {
	wait := releaseRetryMin // gathers the leases of one fault into a batch
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		if wait > 0 {
			t.Reset(wait)
			select {
			case <-r.ctx.Done():
				r.mu.Lock()
				r.running = false // closed: no add starts another
				r.mu.Unlock()
				return
			case <-t.C:
			}
		}
		batch := r.take()
		if batch == nil {
			return
		}
		answered := r.send(batch)
		r.settle(answered)
		if len(answered) == len(batch) {
			wait = 0
		} else {
			wait = min(max(2*wait, releaseRetryMin), releaseRetryMax)
		}
	}
}

// take returns up to releaseBatch queued leases, or nil, marking the
// goroutine stopped, when none is left or the line is closed.
func (r *releaseLine) take() []redisLease {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || len(r.owed) == 0 {
		r.running = false
		return nil
	}
	batch := make([]redisLease, 0, min(len(r.owed), releaseBatch))
	for h := range r.owed {
		if batch = append(batch, h); len(batch) == releaseBatch {
			break
		}
	}
	return batch
}

// settle drops the leases whose release Redis answered.
func (r *releaseLine) settle(answered []redisLease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range answered {
		delete(r.owed, h)
	}
}

// send sends the releases of batch in one pipeline, each its tombstone and
// then its ZREM, and returns the leases whose two commands Redis answered
// (an error reply is an answer: sending it again would not change it).
// It gives up after r.attempt, or when the line is closed.
func (r *releaseLine) send(batch []redisLease) []redisLease {
	ctx, cancel := context.WithTimeout(r.ctx, r.attempt)
	defer cancel()
	done := make(chan []redisLease, 1)
	if !r.crew.spawn(func() { done <- r.sendNow(ctx, batch) }) {
		return nil
	}
	select {
	case answered := <-done:
		return answered
	case <-ctx.Done():
		return nil
	}
}

// sendNow sends the releases of batch in one pipeline under ctx, as send
// says, on the caller's goroutine.
func (r *releaseLine) sendNow(ctx context.Context, batch []redisLease) []redisLease {
	cmds := make([]redis.Cmder, 0, 2*len(batch))
	_, _ = r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, h := range batch {
			cmds = append(cmds, p.Set(ctx, h.tombstone(), "1", r.tombTTL), p.ZRem(ctx, h.rkey, h.member))
		}
		return nil
	})
	var answered []redisLease
	for i, h := range batch {
		if answeredBy(cmds[2*i]) && answeredBy(cmds[2*i+1]) {
			answered = append(answered, h)
		}
	}
	return answered
}

// answeredBy reports whether Redis answered cmd, with a value or an error.
func answeredBy(cmd redis.Cmder) bool {
	var answer redis.Error
	return cmd.Err() == nil || errors.As(cmd.Err(), &answer)
}
