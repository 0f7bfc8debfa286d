package redisstore

import (
	"sync/atomic"
	"time"
)

// lateCall tells the breaker of a flush's call that its waiters' deadline
// passed unanswered, when it passes, on a client that does not end calls
// at their context's deadline (not inline): go-redis then reads the reply
// until its ReadTimeout (3 s by default), and a hung Redis (a stopped
// process, whose kernel still takes connections and commands, or a
// network that drops packets) would keep the breaker closed that long,
// every request meanwhile waiting its whole deadline. A call late for its
// waiters is a failed call, as it is on an inline client, where the call
// ends at that deadline; its reply, if it comes later, still counts as
// Redis answering.
//
// While the call is late, its keys' lines are marked late (keyQueue.late):
// a decision held in such a line, never sent, is a failure too when its
// deadline passes (batcher.heldBehindLate, see gaveUp), as the key's next
// call would be; a probe held there is a failed probe. Otherwise a few
// hung keys, each with its one call in flight, would hold the breaker
// below its run of failures while every request of theirs waited its
// whole deadline. A decision waiting for a flusher (the store is
// saturated) stays no failure of Redis's.
//
// Invariant: the breaker hears of each call once, a failure at its
// waiters' deadline or its outcome when it ends, whichever comes first,
// and a success whenever it comes; a line is marked late only while its
// call is (TestHungRedisOpensBreaker, TestSaturationIsNotARedisFailure).
type lateCall struct {
	g     *guard
	qs    []*keyQueue // the lines of the call's keys, the flusher's while the call lasts
	probe bool
	state atomic.Int32 // lateCallPending, then lateCallHeard or lateCallEnded
	timer *time.Timer
}

const (
	lateCallPending int32 = iota
	lateCallHeard         // the deadline passed first: the breaker heard of a failure
	lateCallEnded         // the call ended first
)

// newLateCall starts watching the call of the lines qs, whose waiters'
// deadline is after from now; probe says whether it carries the
// breaker's probe.
func newLateCall(g *guard, qs []*keyQueue, after time.Duration, probe bool) *lateCall {
	c := &lateCall{g: g, qs: qs, probe: probe}
	c.timer = time.AfterFunc(max(after, 0), c.passed)
	return c
}

// passed records the call as failed and marks its lines late, unless it
// ended first. The state changes under the batcher's lock, as the marks
// do, so endedFirst clears no mark before it is set.
func (c *lateCall) passed() {
	b := c.g.batcher
	b.mu.Lock()
	heard := c.state.CompareAndSwap(lateCallPending, lateCallHeard)
	if heard {
		c.mark(true)
	}
	b.mu.Unlock()
	if heard {
		c.g.breaker.Record(c.g.clock(), false, c.probe)
	}
}

// mark sets or clears the late mark of the call's lines. b.mu is held.
func (c *lateCall) mark(late bool) {
	for _, q := range c.qs {
		q.late = late
	}
}

// endedFirst ends the watch when the call ends, and reports whether the
// breaker has yet to hear of the call: false when the deadline passed
// first and the breaker heard of a failure, whose marks it then clears.
// A nil lateCall (an inline flush) reports true.
func (c *lateCall) endedFirst() bool {
	if c == nil {
		return true
	}
	c.timer.Stop()
	if c.state.CompareAndSwap(lateCallPending, lateCallEnded) {
		return true
	}
	b := c.g.batcher
	b.mu.Lock()
	c.mark(false)
	b.mu.Unlock()
	return false
}

// heldBehindLate reports whether key's line on l waits behind a late call.
func (b *batcher) heldBehindLate(l *redisLimiter, key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[queueKey{l, key}]
	return q != nil && q.late
}
