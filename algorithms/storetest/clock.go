package storetest

import (
	"sync"
	"time"
)

// ManualClock is a clock that moves only when told to, for tests of code
// that rate-limits: give its Now to a store's WithClock (memstore's,
// redisstore's, or RunClocked's store) and to middleware.WithClock,
// and a test walks through minutes of limits in microseconds, with no
// sleep. It is safe for concurrent use.
//
// The Redis store's decisions run on Redis's clock; a ManualClock only
// moves its local side (the denial cache, the breaker, the local twin).
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a clock that reads start until it is advanced.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start}
}

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (back, for a negative d, as a
// corrected clock may step).
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
