package middleware

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// verdict is one request's decision, as the steps after decide read it.
type verdict struct {
	key     string             // what it is counted under, scoped to the route
	cost    int                // what it costs
	lim     algorithms.Limiter // the limiter asked last
	ps      *policySet         // how lim's limits appear in responses
	d       *decision          // the decision's context and header storage; nil for a limiter with deadlines of its own
	res     algorithms.Result  // lim's answer, when err is nil
	err     error              // lim's error, or errBroken
	store   string             // Decision.Store, for an observer only
	took    time.Duration      // how long lim took, for an observer only
	clock   readings           // the request's clock readings
	guarded bool               // lim is behind the breaker
}

// decide is the step that asks the limiter about r: New's limiter or the
// one WithLimiterFunc picks, behind the breaker, and then the fallback if
// that one failed. The count is kept under key scoped to r's route.
func (c *config) decide(r *http.Request, key string) verdict {
	v := verdict{key: key, cost: 1, lim: c.limiter, ps: c.mainPolicies, guarded: true}
	if c.cost != nil {
		v.cost = c.cost(r)
	}
	if c.limiterFunc != nil {
		// Picked by the key alone: a plan belongs to the client, not the
		// route.
		if l := c.limiterFunc(r, key); !isNil(l) {
			v.lim, v.ps = l, c.policiesOf(l)
		}
	}
	if c.routeScope {
		v.key = c.scoped(r, key)
	}
	if c.observer != nil {
		v.clock.start = monotonic()
	}
	ctx := r.Context()
	v.d, v.res, v.err = c.askGuarded(ctx, v.lim, v.key, v.cost, c.delayFor(v.lim), &v.clock)
	if c.fallback != nil && c.limiterFailed(ctx, v.err) {
		c.logFailure(v.err, v.key, "fallback")
		v.lim, v.ps, v.guarded = c.fallback, c.fallbackPolicies, false
		v.clock.after = time.Time{} // the fallback answers later
		// With a deadline of its own, from now.
		v.d, v.res, v.err = c.askWithin(ctx, v.lim, v.key, v.cost, c.delayFor(v.lim))
	}
	v.store, v.took = c.asked(v.lim, &v.clock, v.err)
	return v
}

// readings are the clock readings of one request, each taken at most once
// and shared by whoever needs it: before the limiter is asked, the
// observer's start; once it answered, the breaker, the observer's end and
// X-RateLimit-Reset. Reading the clock is not free (on some virtual
// machines a time.Now costs more than the memory store's decision), and a
// request once read it five times. The start is monotonic only, half the
// cost of a time.Now; a decision context, which needs the wall clock for
// its deadline, reads its own (askWithin).
type readings struct {
	start time.Duration // monotonic() before the limiter was asked; 0 if unread
	after time.Time     // c.now() once it answered; zero if unread
}

// monoBase anchors monotonic: readings are durations since it.
var monoBase = time.Now()

// monotonic reads the monotonic clock alone, as time.Since does, without
// the wall clock that time.Now reads besides.
func monotonic() time.Duration { return time.Since(monoBase) }

// afterTime returns t.after, reading c's clock first if unread.
func (c *config) afterTime(t *readings) time.Time {
	if t.after.IsZero() {
		t.after = c.now()
	}
	return t.after
}

// decision is the state of one request's decision: the context the limiter
// runs under and the storage for the header values that result.
//
// The context behaves as context.WithTimeout(parent, timeout) would, but
// arms its timer only when a limiter asks for Done. A limiter that never
// waits, as the memory store, then costs no timer, no cancel function and
// no registration with the parent: with WithTimeout those are four
// allocations and a timer-heap update on every request, more than the rest
// of the middleware together. The header values share the allocation for
// the same reason.
type decision struct {
	parent   context.Context
	deadline time.Time

	mu         sync.Mutex
	done       chan struct{} // made by the first Done call
	err        error         // once set, never changes
	timer      *time.Timer   // armed by Done
	stopParent func() bool   // armed by Done

	hdr headerText
}

// newDecision returns a decision whose context ends at the earlier of the
// parent's deadline and timeout from now.
func newDecision(parent context.Context, timeout time.Duration) *decision {
	return newDecisionAt(parent, time.Now(), timeout)
}

// newDecisionAt is newDecision with now read already.
func newDecisionAt(parent context.Context, now time.Time, timeout time.Duration) *decision {
	deadline := now.Add(timeout)
	if pd, ok := parent.Deadline(); ok && pd.Before(deadline) {
		deadline = pd
	}
	return &decision{parent: parent, deadline: deadline}
}

// Deadline implements context.Context.
func (d *decision) Deadline() (time.Time, bool) { return d.deadline, true }

// Value implements context.Context.
func (d *decision) Value(key any) any { return d.parent.Value(key) }

// Err implements context.Context: DeadlineExceeded once the deadline has
// passed, the parent's error once the parent is done, Canceled after
// release.
func (d *decision) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.errLocked()
}

// errLocked is Err with d.mu held. Until Done arms the timer, it reads the
// clock and the parent itself; afterwards the timer and the parent's
// callback set err.
func (d *decision) errLocked() error {
	if d.err == nil && d.done == nil {
		if err := d.parent.Err(); err != nil {
			d.err = err
		} else if !time.Now().Before(d.deadline) {
			d.err = context.DeadlineExceeded
		}
	}
	return d.err
}

// Done implements context.Context. The first call arms a timer for the
// deadline and a callback on the parent, as WithTimeout does at once.
func (d *decision) Done() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done != nil {
		return d.done
	}
	err := d.errLocked()
	d.done = make(chan struct{})
	if err != nil {
		close(d.done)
		return d.done
	}
	d.timer = time.AfterFunc(time.Until(d.deadline), func() { d.cancel(context.DeadlineExceeded) })
	d.stopParent = context.AfterFunc(d.parent, func() { d.cancel(d.parent.Err()) })
	return d.done
}

// cancel ends the context with err unless it has ended already. It is
// only called once Done has made the channel.
func (d *decision) cancel(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil {
		d.err = err
		close(d.done)
	}
}

// release ends the context when the limiter has answered, as the cancel
// function of WithTimeout does, and frees the timer and the callback.
func (d *decision) release() {
	d.mu.Lock()
	timer, stopParent := d.timer, d.stopParent
	d.timer, d.stopParent = nil, nil
	if d.err == nil {
		d.err = context.Canceled
		if d.done != nil {
			close(d.done)
		}
	}
	d.mu.Unlock()
	if timer != nil {
		timer.Stop()
	}
	if stopParent != nil {
		stopParent()
	}
}

// askWithin asks l for a decision within the timeout, a reservation within
// delay when it is above 0 (see WithDelay), the timeout counted from now.
// The decision it returns is nil when l keeps deadlines of its own.
func (c *config) askWithin(parent context.Context, l algorithms.Limiter, key string, cost int, delay time.Duration) (*decision, algorithms.Result, error) {
	timeout := c.timeout
	if b, ok := l.(algorithms.DecisionBounder); ok {
		bound := b.DecisionTimeout()
		if !c.timeoutSet || timeout >= bound {
			// The limiter keeps a deadline of its own, no later than ours,
			// on its own timers: it needs no context of ours, which would
			// arm a timer per request once asked for Done.
			res, err := c.ask(parent, l, key, cost, delay)
			return nil, res, err
		}
	}
	d := newDecision(parent, timeout)
	res, err := c.ask(d, l, key, cost, delay)
	d.release()
	return d, res, err
}
