// Package breaker decides when a rate limiter stops asking a store that
// looks unhealthy, on evidence gathered over many calls rather than from one
// error: a run of consecutive failures, or a failure ratio over a short
// window with enough calls in it; or at once on evidence that needs no
// second call (Trip: the store refused a connection). While it is open
// nothing is asked; once the open time is over one call (the probe) is let
// through, and its outcome closes the breaker or opens it again, for twice
// the open time before, up to a cap (MaxOpenFor), so that a long outage
// costs a probe and a change of state ever more rarely (TestBackoff,
// TestTrip).
package breaker

import (
	"sync"
	"sync/atomic"
	"time"
)

// State is the breaker's state.
type State int32

const (
	// Closed lets every call through.
	Closed State = iota
	// Open lets no call through.
	Open
	// HalfOpen lets one call through, the probe, and no other until its
	// outcome is recorded.
	HalfOpen
)

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "unknown"
}

// Config sets when the breaker opens and for how long. A zero field takes
// the default named beside it.
type Config struct {
	// Failures is the run of consecutive failures that opens the breaker
	// (default 5).
	Failures int
	// Ratio is the share of failures among the calls of one Window that
	// opens the breaker, once the window holds MinCalls calls (default 0.5).
	Ratio float64
	// MinCalls is the fewest calls in a window for Ratio to apply
	// (default 20).
	MinCalls int
	// Window is the span over which Ratio is measured (default 1 s).
	Window time.Duration
	// OpenFor is how long the breaker stays open before its first probe
	// (default 500 ms).
	OpenFor time.Duration
	// MaxOpenFor caps the open time, which each failed probe doubles, from
	// OpenFor, and a probe's success sets back to OpenFor (default, and at
	// least, OpenFor: no backoff).
	MaxOpenFor time.Duration
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Failures == 0 {
		c.Failures = 5
	}
	if c.Ratio == 0 {
		c.Ratio = 0.5
	}
	if c.MinCalls == 0 {
		c.MinCalls = 20
	}
	if c.Window == 0 {
		c.Window = time.Second
	}
	if c.OpenFor == 0 {
		c.OpenFor = 500 * time.Millisecond
	}
	c.MaxOpenFor = max(c.MaxOpenFor, c.OpenFor)
	return c
}

// Breaker is a circuit breaker, safe for concurrent use. The zero value is
// not usable; call New.
type Breaker struct {
	cfg      Config
	onChange func(from, to State, reason string)

	state atomic.Int32 // a State, read without the lock on the fast path

	// A success while closed, within the window, is counted without the
	// lock: most calls succeed, and the lock is contended at every call.
	// windowEnd is the window's end (Unix ns, 0 until the first one
	// starts); successes are added to calls, and succeeded ends the run of
	// consecutive failures, when a call next takes the lock.
	windowEnd atomic.Int64
	successes atomic.Int64
	succeeded atomic.Bool

	mu          sync.Mutex
	consecutive int
	windowStart time.Time
	calls       int
	failures    int
	openedAt    time.Time
	openFor     time.Duration // the open time now: OpenFor doubled per failed probe, up to MaxOpenFor
	probing     bool
}

// New returns a closed breaker. onChange, if not nil, is called once per
// change of state, with the lock released, with why it changed.
func New(cfg Config, onChange func(from, to State, reason string)) *Breaker {
	b := &Breaker{cfg: cfg.WithDefaults(), onChange: onChange}
	b.openFor = b.cfg.OpenFor
	return b
}

// OpenFor returns the open time now: how long the breaker stays open
// after it opened (again), before a probe.
func (b *Breaker) OpenFor() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.openFor
}

// State returns the current state.
func (b *Breaker) State() State { return State(b.state.Load()) }

// Closed reports whether the breaker is closed: Allow would let a call
// through, whatever the time, and it would not be a probe.
func (b *Breaker) Closed() bool { return State(b.state.Load()) == Closed }

// Allow reports whether a call may go through at now, and whether that call
// is the probe, whose outcome must be recorded with probe set.
func (b *Breaker) Allow(now time.Time) (ok, probe bool) {
	if State(b.state.Load()) == Closed {
		return true, false
	}
	b.mu.Lock()
	st := State(b.state.Load())
	switch {
	case st == Closed:
		b.mu.Unlock()
		return true, false
	case b.probing || now.Sub(b.openedAt) < b.openFor:
		b.mu.Unlock()
		return false, false
	}
	b.probing = true
	b.state.Store(int32(HalfOpen))
	b.mu.Unlock()
	b.changed(st, HalfOpen, "probing after the open time")
	return true, true
}

// Record records a call's outcome at now. A probe's success closes the
// breaker and sets the open time back to OpenFor; its failure opens it
// again and doubles the open time, up to MaxOpenFor. A probe's outcome
// that comes after Trip ended the probe is ignored. Other outcomes count
// towards the consecutive-failure run and the window's ratio while the
// breaker is closed, and are ignored otherwise (they were let through
// before it opened).
func (b *Breaker) Record(now time.Time, success, probe bool) {
	if success && !probe && State(b.state.Load()) == Closed && now.UnixNano() < b.windowEnd.Load() {
		b.successes.Add(1)
		if !b.succeeded.Load() {
			b.succeeded.Store(true)
		}
		return
	}
	b.mu.Lock()
	b.calls += int(b.successes.Swap(0))
	if b.succeeded.Swap(false) {
		b.consecutive = 0
	}
	st := State(b.state.Load())
	if probe {
		if !b.probing { // Trip ended it: the breaker heard already
			b.mu.Unlock()
			return
		}
		b.probing = false
		to, reason, openFor := Closed, "the probe succeeded", b.cfg.OpenFor
		if !success {
			to, reason, openFor = Open, "the probe failed", b.backedOff()
			b.openedAt = now
		}
		b.openFor = openFor
		b.reset(now)
		b.state.Store(int32(to))
		b.mu.Unlock()
		b.changed(st, to, reason)
		return
	}
	if st != Closed {
		b.mu.Unlock()
		return
	}
	if now.Sub(b.windowStart) >= b.cfg.Window {
		b.windowStart, b.calls, b.failures = now, 0, 0
		b.windowEnd.Store(now.Add(b.cfg.Window).UnixNano())
	}
	b.calls++
	if success {
		b.consecutive = 0
		b.mu.Unlock()
		return
	}
	b.failures++
	b.consecutive++
	var reason string
	switch {
	case b.consecutive >= b.cfg.Failures:
		reason = "consecutive failures"
	case b.calls >= b.cfg.MinCalls && float64(b.failures) >= b.cfg.Ratio*float64(b.calls):
		reason = "failure ratio"
	default:
		b.mu.Unlock()
		return
	}
	b.openedAt = now
	b.reset(now)
	b.state.Store(int32(Open))
	b.mu.Unlock()
	b.changed(Closed, Open, reason)
}

// Trip opens the breaker at now on evidence that needs no second call (the
// store refused a connection): a closed breaker opens whatever its counts;
// a half-open one opens as if its probe had failed, doubling the open time
// (the probe's own outcome, when it comes, is ignored). An open breaker is
// left as it is, its open time running on: the same evidence keeps coming
// while the store stays away. It takes no lock when the breaker is open.
func (b *Breaker) Trip(now time.Time, reason string) {
	if State(b.state.Load()) == Open {
		return
	}
	b.mu.Lock()
	from := State(b.state.Load())
	switch from {
	case Open:
		b.mu.Unlock()
		return
	case HalfOpen:
		b.probing = false
		b.openFor = b.backedOff()
	}
	b.openedAt = now
	b.reset(now)
	b.state.Store(int32(Open))
	b.mu.Unlock()
	b.changed(from, Open, reason)
}

// backedOff returns the open time after a failed probe: twice what it
// was, up to MaxOpenFor. (A closed breaker's is OpenFor: a probe's success
// set it back.) The caller holds b.mu.
func (b *Breaker) backedOff() time.Duration {
	return min(2*b.openFor, b.cfg.MaxOpenFor)
}

// reset starts the counts over. The caller holds b.mu.
func (b *Breaker) reset(now time.Time) {
	b.consecutive, b.calls, b.failures, b.windowStart = 0, 0, 0, now
	b.windowEnd.Store(now.Add(b.cfg.Window).UnixNano())
	b.successes.Store(0)
	b.succeeded.Store(false)
}

func (b *Breaker) changed(from, to State, reason string) {
	if b.onChange != nil && from != to {
		b.onChange(from, to, reason)
	}
}

// CancelProbe gives back a probe that was allowed but never sent: the
// breaker returns to open, and the next Allow may probe at once.
func (b *Breaker) CancelProbe() {
	b.mu.Lock()
	if !b.probing {
		b.mu.Unlock()
		return
	}
	b.probing = false
	b.openedAt = time.Time{}
	b.state.Store(int32(Open))
	b.mu.Unlock()
	b.changed(HalfOpen, Open, "the probe was not sent")
}
