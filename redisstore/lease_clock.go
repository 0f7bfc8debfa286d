package redisstore

import "time"

// leaseClock returns the clock the leases are timed by, in Unix
// nanoseconds on the store's clock: with the default clock (set false),
// the wall time at the call plus the monotonic time elapsed since, one
// cheap monotonic read per decision rather than time.Now's wall and
// monotonic reads; with WithClock's clock, that clock as it is, so tests
// that move it move the leases too.
//
// Invariant: with the default clock, its readings never go back and
// measure elapsed time as the monotonic clock does, so a lease ends no
// later than ttl after its grant was sent, however the wall clock is
// stepped meanwhile (TestLeaseClockMonotonic).
func leaseClock(clock func() time.Time, set bool) func() int64 {
	if set {
		return func() int64 { return clock().UnixNano() }
	}
	start := time.Now()
	wall := start.UnixNano()
	return func() int64 { return wall + int64(time.Since(start)) }
}
