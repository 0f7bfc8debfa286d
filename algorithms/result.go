package algorithms

import (
	"strconv"
	"time"
)

// Result is the decision on one request.
type Result struct {
	// Allowed reports whether the request may pass.
	Allowed bool
	// Limit is the quota of the binding limit: Rate for the window
	// algorithms, the bucket capacity (Burst, or Rate) for the bucket ones.
	Limit int
	// Remaining is what is left of the binding limit's quota after this
	// request; never negative.
	Remaining int
	// ResetAfter is the time until the binding limit's quota is whole again
	// if no other request comes in. For the sliding window counter it can
	// reach two periods.
	ResetAfter time.Duration
	// RetryAfter is 0 when Allowed; otherwise the time after which the same
	// request would pass if no other request comes in.
	RetryAfter time.Duration
	// Delay is 0 but for a reservation (see RateLimiter.Reserve): an allowed Result
	// with Delay above 0 means "proceed after Delay; the slot is yours".
	Delay time.Duration
	// Period is the window that Limit is a quota for, for headers that name
	// one: the binding limit's Period for the window algorithms; for the
	// bucket algorithms the time a bucket takes to refill from empty
	// (Burst × Period / Rate, rounded up to the microsecond), so that Limit
	// per Period is both the burst and the sustained rate. (A bucket that
	// counts time in a unit coarser than 1µs, see Limit.Validate, is full at
	// the start of a unit: its ResetAfter can pass Period by less than one.)
	Period time.Duration
	// Index is the binding limit's position among the limits given to New,
	// from 0, as RateLimiter.Policies lists them.
	Index int
	// Decider says what made the decision: the store itself, or, for a
	// Redis store that could not decide in time, a stand-in (see Decider).
	Decider Decider
}

// Decider names what made a decision.
type Decider uint8

// Policy is one limit of a Limiter as rate-limit headers state it: Quota
// units per Window, with the meanings of Result.Limit and Result.Period.
type Policy struct {
	Quota  int
	Window time.Duration
}

// String returns the decider's name in snake case, as metrics label it:
// "store", "cache", "local", "fail_open" or "fail_closed".
func (d Decider) String() string {
	switch d {
	case DecidedByStore:
		return "store"
	case DecidedByCache:
		return "cache"
	case DecidedLocally:
		return "local"
	case DecidedFailOpen:
		return "fail_open"
	case DecidedFailClosed:
		return "fail_closed"
	}
	return "decider(" + strconv.Itoa(int(d)) + ")"
}

const (
	// DecidedByStore is a decision of the store itself: Redis's script, or
	// the memory store.
	DecidedByStore Decider = iota
	// DecidedByCache is a denial that Redis issued for this key and an equal
	// or smaller cost, repeated from the Redis store's local cache until its
	// RetryAfter has passed, without asking Redis again.
	DecidedByCache
	// DecidedLocally is a decision of the Redis store's in-memory twin, which
	// enforces the same limits (or a share of them, see WithInstances) in this
	// process while Redis cannot decide: an error, a timeout, the breaker
	// open, or this process saturated. Limit, Remaining and the durations
	// then describe the local limit.
	DecidedLocally
	// DecidedFailOpen is a pass that nothing counted: Redis could not decide
	// and the store's FailureMode is FailOpen.
	DecidedFailOpen
	// DecidedFailClosed is a refusal that nothing counted: Redis could not
	// decide and the store's FailureMode is FailClosed. RetryAfter is the
	// time after which to try again.
	DecidedFailClosed
)
