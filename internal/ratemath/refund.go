package ratemath

import "github.com/redlimit/redlimit/algorithms"

// Refund gives back up to cost units consumed no later than sinceUS from an
// entry decide has just brought up to nowUS, as the scripts' Refund
// functions do, and reports whether it changed the entry.
func (e *Entry) Refund(alg algorithms.Algorithm, nowUS int64, p Params, cost, sinceUS int64) bool {
	now, since := floorDiv(nowUS, p.Unit), floorDiv(sinceUS, p.Unit)
	switch alg {
	case algorithms.FixedWindow:
		if e.B == 0 || e.A-p.Period > since {
			return false
		}
		e.B = max(e.B-cost, 0)
	case algorithms.SlidingWindowCounter:
		if e.B == 0 || e.A > since {
			return false
		}
		e.B = max(e.B-cost, 0)
	case algorithms.SlidingWindowLog:
		// decide has dropped the times that left the window.
		if since <= now-p.Period || e.Log.N == 0 {
			return false
		}
		e.Log.N -= int(min(cost, int64(e.Log.N)))
	case algorithms.TokenBucket:
		capacity := p.Burst * p.Period
		if e.A >= capacity {
			return false
		}
		e.A, e.B = min(e.A+cost*p.Period, capacity), now
	case algorithms.LeakyBucket:
		backlog := (e.A-now)*p.Rate + e.B
		if backlog == 0 {
			return false
		}
		after := max(backlog-cost*p.Period, 0)
		// What stays past the capacity is still reserved (see decide).
		e.A, e.B, e.C = now+after/p.Rate, after%p.Rate, max(after-p.Burst*p.Period, 0)
	default:
		return false
	}
	return true
}

// Drained reports whether a refund left e meaning no state, which the
// scripts then delete: an empty log (which has no expiry), a full bucket,
// a TAT of now.
func (e *Entry) Drained(alg algorithms.Algorithm, nowUS int64, p Params) bool {
	switch alg {
	case algorithms.SlidingWindowLog:
		return e.Log.N == 0
	case algorithms.TokenBucket:
		return e.A >= p.Burst*p.Period
	case algorithms.LeakyBucket:
		return e.A == floorDiv(nowUS, p.Unit) && e.B == 0
	}
	return false
}

// Overdraws reports whether alg can take a charge past what it has left.
func Overdraws(alg algorithms.Algorithm) bool {
	return alg == algorithms.SlidingWindowCounter || alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket
}

// Overdraw charges c units to an entry that Decide has just brought up to
// now (µs) for a cost of 0, past what it has left, as the scripts'
// overdraw: the sliding window counter fills its current count up to the
// rate; the token bucket's level falls by c tokens, but not below one
// token above minus the burst; the leaky bucket's backlog grows by c units,
// but not past twice the capacity less one unit, the excess kept as a
// reservation's. The comparisons divide, so that no product overflows.
// It reports whether it changed the entry.
func (e *Entry) Overdraw(alg algorithms.Algorithm, nowUS int64, p Params, c int64) bool {
	switch alg {
	case algorithms.SlidingWindowCounter:
		n := min(c, p.Rate-e.B)
		if n <= 0 {
			return false
		}
		e.B += n
		return true
	case algorithms.TokenBucket:
		low := (1 - p.Burst) * p.Period
		if e.A <= low {
			return false
		}
		if c > (e.A-low)/p.Period {
			e.A = low
		} else {
			e.A -= c * p.Period
		}
		return true
	case algorithms.LeakyBucket:
		now := floorDiv(nowUS, p.Unit)
		capacity := p.Burst * p.Period
		high := 2*capacity - p.Period
		after := (e.A-now)*p.Rate + e.B
		if after >= high {
			return false
		}
		if c > (high-after)/p.Period {
			after = high
		} else {
			after += c * p.Period
		}
		e.A, e.B, e.C = now+after/p.Rate, after%p.Rate, max(after-capacity, 0)
		return true
	}
	return false
}
