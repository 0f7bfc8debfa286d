package redisstore

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// Waiter states. A waiter moves from queued to sent when its flusher takes
// it, and to done when its answer is delivered; it moves to abandoned when
// its deadline passes first, and is then decided by the failure mode; what
// the twin then admits is owed to Redis (see owed_charges.go).
const (
	waiterQueued int32 = iota
	waiterSent
	waiterDone
	waiterAbandoned
	// waiterDropped: taken from the queue unsent, its deadline too close
	// for a round trip; its owner gives up by itself.
	waiterDropped
)

// waiter is one decision waiting for Redis.
type waiter struct {
	cost     int
	deadline time.Time
	probe    bool // the breaker's probe: its call's outcome closes or opens the breaker
	state    atomic.Int32
	res      algorithms.Result
	err      error
	done     chan struct{} // receives once the answer is delivered

	// Of a waiter abandoned after it was sent, under the batcher's lock:
	// what its call did, once known, and the cost the twin admitted
	// meanwhile (see decideSent).
	outcome   int8
	localCost int
	doubt     callDoubt // of a waiter whose call failed: see doubtOf
}

// minRoundTrip is the least time before its deadline for a waiter to be
// sent to Redis.
const minRoundTrip = time.Millisecond

var waiters = sync.Pool{New: func() any { return &waiter{done: make(chan struct{}, 1)} }}

// newWaiter returns a queued waiter. Only a waiter whose answer was
// delivered and read goes back to the pool: a flusher may still hold one
// that was abandoned.
func newWaiter(cost int, deadline time.Time, probe bool) *waiter {
	w := waiters.Get().(*waiter)
	w.cost, w.deadline, w.probe = cost, deadline, probe
	w.res, w.err = algorithms.Result{}, nil
	w.outcome, w.localCost, w.doubt = outcomeUnknown, 0, callDoubt{}
	w.state.Store(waiterQueued)
	return w
}

// deliver hands a sent waiter its answer, unless it was abandoned; it
// reports whether it did.
func (w *waiter) deliver(res algorithms.Result, err error) bool {
	if w.state.Load() != waiterSent {
		return false
	}
	w.res, w.err = res, err
	if w.state.CompareAndSwap(waiterSent, waiterDone) {
		w.done <- struct{}{}
		return true
	}
	return false
}
