package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// deadlineWheel hands out channels that close when a deadline passes,
// rounded up to the next millisecond, one channel for every deadline in
// that millisecond: one timer for all of a store's waiting decisions and
// calls, instead of a timer (and its allocations) for each. Deadlines are
// durations from now on the monotonic clock, so a step of the wall clock
// moves none of them.
//
// expireAll ends every wait at once, when Redis refused a connection (see
// dial_watch.go): the decisions waiting decide by the failure mode, and the
// calls end, as they would at their deadline, so that every path they take
// is one a passed deadline takes.
type deadlineWheel struct {
	start time.Time // the wheel's epoch: ticks are milliseconds since it

	mu      sync.Mutex
	buckets map[int64]chan struct{} // tick → channel closed at it
	timer   *time.Timer
	next    int64 // tick the timer is armed for, 0 when none
	closed  bool  // by close: every deadline has passed, for good

	// latest is the bucket made last, read without the lock: the decisions
	// of one millisecond share it. Its tick is in the future when it matches
	// a new deadline's, so it is still in buckets, not yet closed.
	latest atomic.Pointer[bucket]

	// cut is closed by expireAll, and replaced: what a wait bound by
	// another deadline (the caller's context's) watches as well.
	cut atomic.Pointer[chan struct{}]
}

type bucket struct {
	tick int64
	ch   chan struct{}
}

func newDeadlineWheel() *deadlineWheel {
	w := &deadlineWheel{start: time.Now(), buckets: map[int64]chan struct{}{}}
	cut := make(chan struct{})
	w.cut.Store(&cut)
	return w
}

// cutOff returns a channel that expireAll closes.
func (w *deadlineWheel) cutOff() <-chan struct{} { return *w.cut.Load() }

// expired is a channel closed from the start: what a closed wheel hands
// out.
var expired = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// expireAll closes every channel handed out (by after, contextFor and
// cutOff) now, as if every deadline had passed. A channel handed out while
// it runs may be closed too.
func (w *deadlineWheel) expireAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.latest.Store(nil) // its channel is closed below: no new wait may get it
	for tick, ch := range w.buckets {
		close(ch)
		delete(w.buckets, tick)
	}
	cut := make(chan struct{})
	if w.closed {
		cut = expired
	}
	if old := *w.cut.Swap(&cut); old != expired {
		close(old)
	}
}

// close ends every wait and call now, as expireAll does, and for good:
// the channels and contexts handed out from then on have expired already,
// and the wheel's timer is stopped. Store.Close calls it.
func (w *deadlineWheel) close() {
	w.mu.Lock()
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
	w.expireAll()
}

// after returns a channel closed once d has passed (within a millisecond
// more).
func (w *deadlineWheel) after(d time.Duration) <-chan struct{} {
	tick := int64((time.Since(w.start)+max(d, 0))/time.Millisecond) + 1
	if b := w.latest.Load(); b != nil && b.tick == tick {
		return b.ch
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return expired
	}
	ch := w.buckets[tick]
	if ch == nil {
		ch = make(chan struct{})
		w.buckets[tick] = ch
		if w.next == 0 || tick < w.next {
			w.arm(tick)
		}
		w.latest.Store(&bucket{tick, ch})
	}
	return ch
}

// arm sets the timer for tick. w.mu is held.
func (w *deadlineWheel) arm(tick int64) {
	w.next = tick
	d := time.Until(w.start.Add(time.Duration(tick) * time.Millisecond))
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.fire)
	} else {
		w.timer.Reset(d)
	}
}

// fire closes the channels whose tick has come and arms the timer for the
// earliest left.
func (w *deadlineWheel) fire() {
	now := int64(time.Since(w.start) / time.Millisecond)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next = 0
	var earliest int64
	for tick, ch := range w.buckets {
		if tick <= now {
			close(ch)
			delete(w.buckets, tick)
		} else if earliest == 0 || tick < earliest {
			earliest = tick
		}
	}
	if earliest != 0 {
		w.arm(earliest)
	}
}

// wheelContext is a context without values or cancellation that ends at a
// deadline kept by a deadlineWheel: what a script call runs under.
type wheelContext struct {
	context.Context // Background: no values
	deadline        time.Time
	done            <-chan struct{}
}

// contextFor returns a context that ends d from now. Its Deadline is on
// the wall clock, as a client that bounds I/O by it needs, whatever clock
// the store keeps.
func (w *deadlineWheel) contextFor(d time.Duration) *wheelContext {
	return &wheelContext{Context: context.Background(), deadline: time.Now().Add(d), done: w.after(d)}
}

// Deadline implements context.Context.
func (c *wheelContext) Deadline() (time.Time, bool) { return c.deadline, true }

// Done implements context.Context.
func (c *wheelContext) Done() <-chan struct{} { return c.done }

// Err implements context.Context: DeadlineExceeded once the deadline has
// passed, Canceled when expireAll ended it before.
func (c *wheelContext) Err() error {
	select {
	case <-c.done:
		if time.Now().Before(c.deadline) {
			return context.Canceled
		}
		return context.DeadlineExceeded
	default:
		return nil
	}
}
