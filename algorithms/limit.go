// Package algorithms decides whether a request may pass a rate limit.
//
// It offers five algorithms (fixed window, sliding window log, sliding
// window counter, token bucket and leaky bucket as a meter, GCRA), each
// running either atomically inside Redis, as one Lua script per decision, or
// in process memory. Both stores give the same answers for the same sequence
// of requests; a conformance suite holds them to it.
//
// The package knows nothing of HTTP: a key is any string that names who is
// asking, and the caller decides what to do with a Result.
package algorithms

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Sentinel errors, for callers that branch on the kind of failure. Errors
// about the caller's input wrap one of them; a store's failure is returned
// wrapped as it came (a go-redis error, a context error).
var (
	// ErrInvalidLimit reports a Limit that cannot be enforced.
	ErrInvalidLimit = errors.New("algorithms: invalid limit")
	// ErrUnknownAlgorithm reports an Algorithm this package does not implement.
	ErrUnknownAlgorithm = errors.New("algorithms: unknown algorithm")
	// ErrInvalidCost reports a cost below 1.
	ErrInvalidCost = errors.New("algorithms: cost must be at least 1")
	// ErrCostExceedsLimit reports a cost larger than a limit's quota: such a
	// request could never pass, so it is refused without touching the store.
	ErrCostExceedsLimit = errors.New("algorithms: cost exceeds the limit's quota")
	// ErrInvalidKey reports an empty key or one longer than MaxKeyLength.
	ErrInvalidKey = errors.New("algorithms: invalid key")
	// ErrInvalidOption reports a store option with a value it cannot use.
	ErrInvalidOption = errors.New("algorithms: invalid option")
)

// MaxKeyLength is the longest key, in bytes, that Allow accepts.
const MaxKeyLength = 1024

// maxExact is the largest integer a Lua number (an IEEE double) holds
// exactly. The Redis scripts compute in integers up to this bound, in a
// representation chosen per limit (see paramsFor) so that they never pass
// it.
const maxExact = 1 << 53

// Bounds on limits. Every limit within them is computed exactly, in Redis
// and in memory alike; a limit past them is refused by New with
// ErrInvalidLimit rather than computed with numbers that would overflow or
// round. For no limit at all, do not rate-limit (leave out the middleware,
// or skip the requests concerned) rather than set a huge Rate.
const (
	// MaxRate is the largest Rate, and the largest Burst, of any limit.
	MaxRate = 1_000_000_000
	// MaxPeriod is the longest Period: a year and a day.
	MaxPeriod = 366 * 24 * time.Hour
	// MaxRefill is the longest time a bucket (token or leaky) may take to
	// refill from empty, Burst × Period / Rate: a hundred years, so that its
	// times and durations stay exact and fit a time.Duration.
	MaxRefill = 100 * 365 * 24 * time.Hour
	// MaxSlidingLogRate is the highest Rate of the sliding window log. Its
	// state in Redis holds one sorted-set member per admission in the
	// window, so at most Rate members: a bound on a key's memory (about
	// 1.3 MB at this cap when every request is admitted on its own), while
	// one decision's work does not grow with the cost. Use the sliding
	// window counter for more.
	MaxSlidingLogRate = 10_000
)

// Limit is a quota: Rate requests per Period. Burst applies to the bucket
// algorithms (token bucket and leaky bucket): the most requests that may pass
// at once, after which they pass at the steady Rate per Period. Burst 0 means
// Rate. The window algorithms ignore Burst.
type Limit struct {
	Rate   int
	Period time.Duration
	Burst  int
}

// PerSecond returns a Limit of n requests per second.
func PerSecond(n int) Limit { return Limit{Rate: n, Period: time.Second} }

// PerMinute returns a Limit of n requests per minute.
func PerMinute(n int) Limit { return Limit{Rate: n, Period: time.Minute} }

// PerHour returns a Limit of n requests per hour.
func PerHour(n int) Limit { return Limit{Rate: n, Period: time.Hour} }

// WithBurst returns a copy of l whose Burst is b.
func (l Limit) WithBurst(b int) Limit { l.Burst = b; return l }

// String describes the limit, as "100/1m0s" or "10/1s burst 20".
func (l Limit) String() string {
	if l.Burst != 0 && l.Burst != l.Rate {
		return fmt.Sprintf("%d/%s burst %d", l.Rate, l.Period, l.Burst)
	}
	return fmt.Sprintf("%d/%s", l.Rate, l.Period)
}

// Validate reports whether the limit can be enforced by any algorithm. A
// limit needs a Rate from 1 to MaxRate, a Period from one millisecond to
// MaxPeriod that is a whole number of microseconds, and a Burst from 0 to
// MaxRate. New checks further bounds that depend on the algorithm; see
// ValidateFor.
func (l Limit) Validate() error {
	switch {
	case l.Rate <= 0 || l.Rate > MaxRate:
		return fmt.Errorf("%w: rate %d must be from 1 to %d (for no limit, do not rate-limit)", ErrInvalidLimit, l.Rate, MaxRate)
	case l.Period < time.Millisecond || l.Period > MaxPeriod:
		return fmt.Errorf("%w: period %s must be from 1ms to %s", ErrInvalidLimit, l.Period, MaxPeriod)
	case l.Period%time.Microsecond != 0:
		return fmt.Errorf("%w: period %s must be a whole number of microseconds", ErrInvalidLimit, l.Period)
	case l.Burst < 0 || l.Burst > MaxRate:
		return fmt.Errorf("%w: burst %d must be from 0 to %d", ErrInvalidLimit, l.Burst, MaxRate)
	}
	return nil
}

// ValidateFor reports whether alg can enforce the limit exactly. Beyond
// Validate: the sliding window log takes a Rate of at most
// MaxSlidingLogRate, and a bucket must refill from empty (Burst × Period /
// Rate) within MaxRefill. Every other limit is exact on every store: where
// microseconds would take a number past 2^53, the largest integer a Lua
// number holds exactly, the algorithm counts time in a coarser unit that
// divides the period (see the README's Limits section).
func (l Limit) ValidateFor(alg Algorithm) error {
	if err := l.Validate(); err != nil {
		return err
	}
	switch alg {
	case SlidingWindowLog:
		if l.Rate > MaxSlidingLogRate {
			return fmt.Errorf("%w: the sliding window log takes a rate of at most %d, got %s; the sliding window counter takes more",
				ErrInvalidLimit, MaxSlidingLogRate, l)
		}
	case TokenBucket, LeakyBucket:
		if us, ok := refillMicros(l); !ok || us > int64(maxRefill) {
			return fmt.Errorf("%w: %s takes longer than %s to refill from empty", ErrInvalidLimit, l, MaxRefill)
		}
	}
	return nil
}

// burst is the bucket capacity: Burst, or Rate when Burst is 0.
func (l Limit) burst() int {
	if l.Burst == 0 {
		return l.Rate
	}
	return l.Burst
}

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
	// counts time in a unit coarser than 1µs, see ValidateFor, is full at
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

// Policy is one limit of a Limiter as rate-limit headers state it: Quota
// units per Window, with the meanings of Result.Limit and Result.Period.
type Policy struct {
	Quota  int
	Window time.Duration
}

// policies describes limits under alg.
func policies(alg Algorithm, limits []Limit) []Policy {
	ps := make([]Policy, len(limits))
	for i, l := range limits {
		ps[i] = Policy{Quota: quota(alg, l), Window: window(alg, l)}
	}
	return ps
}

// Limiter decides whether requests may pass.
type Limiter interface {
	// Allow decides whether a request of the given cost may pass for key,
	// and consumes cost units when it does. A denied request consumes
	// nothing. It returns ErrInvalidKey, ErrInvalidCost or
	// ErrCostExceedsLimit (wrapped) for requests it cannot decide, and the
	// store's error, wrapped, when the store fails.
	Allow(ctx context.Context, key string, cost int) (Result, error)
}

// RateLimiter is what New returns: a Limiter that describes its limits,
// can inspect and reset a key's state, reserve, give units back and charge
// a cost known only after the work. A Store's NewLimiter implements it.
type RateLimiter interface {
	Limiter
	// Algorithm returns the algorithm the limiter was built with.
	Algorithm() Algorithm
	// Policies returns the limits in the order given to New.
	Policies() []Policy
	// Peek returns the Result a request of cost 1 for key would get now,
	// consuming nothing: one round trip on Redis, atomic like Allow.
	Peek(ctx context.Context, key string) (Result, error)
	// Reset forgets key's state under every limit of the limiter, so its
	// next request starts afresh.
	Reset(ctx context.Context, key string) error
	// Reserve decides a request of cost for key as Allow does, but also
	// admits one that the limits would admit within maxDelay: its units are
	// taken now, and Result.Delay, when above 0, is how long the caller must
	// wait before the request proceeds. The slot is then the request's:
	// nothing gives it back. A request that would have to wait longer is
	// denied, consuming nothing, with RetryAfter as Allow reports it. A
	// maxDelay of 0 is Allow. It returns ErrInvalidOption (wrapped) for an
	// algorithm that cannot reserve, or a maxDelay below 0 or above
	// MaxDelay, and Allow's errors otherwise.
	Reserve(ctx context.Context, key string, cost int, maxDelay time.Duration) (Result, error)
	// Refund gives back up to cost units that key consumed at least age
	// ago (pass the time since the consuming call returned), under every
	// limit of the limiter, atomically (one script call on Redis, counted
	// once however often the client sends it). It never gives back more
	// than the current state holds and never leaves more than the quota:
	// the window algorithms decrement the current window's count, not
	// below 0, and not when that window began less than age ago (a unit
	// consumed in a window that has ended gives nothing back); the sliding
	// window log removes the newest admissions in the window, and nothing
	// when age is a period or more (the admission has left the window);
	// the token bucket puts tokens back, capped at its burst; the leaky
	// bucket moves its theoretical arrival time back, not before now. It
	// returns the Result a request of cost 0 would get after the refund.
	// A cost above the limits' largest quota gives back that quota.
	//
	// On Redis, a refund Redis cannot answer is lost, and the error is
	// returned wrapped: it errs on the strict side, and the local stand-in
	// is not touched, since it did not take the units.
	Refund(ctx context.Context, key string, cost int, age time.Duration) (Result, error)
	// Charge takes up to cost units for key under every limit of the
	// limiter, and is never refused: each limit takes cost when it has that
	// much left, and otherwise all it has left, the Remaining a request of
	// cost 0 would be told, so that the next request that needs a unit is
	// refused until the quota comes back. A cost above a limit's quota so
	// takes at most that quota. A bucket keeps a fraction of a unit it has
	// refilled, which no request can use; a bucket already past its
	// capacity after a reservation takes nothing more. It is atomic (one
	// script call on Redis, counted once however often the client sends
	// it) and returns the Result a request of cost 0 would get after it:
	// Remaining 0 when the charge took all that was left.
	//
	// On Redis, a charge Redis cannot answer is not made there, and the
	// error is returned wrapped; under FailLocal the local twin takes the
	// charge, so that the stand-in that decides while Redis cannot counts
	// it.
	Charge(ctx context.Context, key string, cost int) (Result, error)
}

// Algorithm names a rate-limit algorithm.
type Algorithm string

// The algorithms this package implements.
const (
	// FixedWindow counts requests in a window of Period that starts with the
	// key's first request; the count restarts when the window ends.
	FixedWindow Algorithm = "fixed_window"
	// SlidingWindowLog records each request's time and allows at most Rate
	// within any Period. Exact, at O(Rate) memory per key.
	SlidingWindowLog Algorithm = "sliding_window_log"
	// SlidingWindowCounter estimates a rolling window from the current and
	// the previous window's counts, weighting the previous by how much of it
	// still overlaps the rolling window. O(1) memory per key.
	SlidingWindowCounter Algorithm = "sliding_window_counter"
	// TokenBucket holds up to Burst tokens, refilled at Rate per Period; a
	// request takes cost tokens.
	TokenBucket Algorithm = "token_bucket"
	// LeakyBucket is the leaky bucket as a meter, by the generic cell rate
	// algorithm (GCRA): it stores one theoretical arrival time per key.
	LeakyBucket Algorithm = "leaky_bucket"
)

// Algorithms lists every Algorithm this package implements.
var Algorithms = []Algorithm{FixedWindow, SlidingWindowLog, SlidingWindowCounter, TokenBucket, LeakyBucket}

// Store holds rate-limit state: the Redis store (package redisstore), the
// in-process one (package memstore), or one of your own. Limiters built on
// one store with the same algorithm and limit share state per key;
// limiters that differ in either never do. New and NewConcurrency validate
// their arguments and then ask the store, so a store's methods are called
// with valid ones only. The conformance suite, package storetest, checks
// that a store keeps the contract.
type Store interface {
	// NewLimiter returns a limiter that enforces every one of limits with
	// alg, each request passing only when all allow it and then consuming
	// from all. New has validated alg and limits (no two share a state),
	// and limits is the limiter's own copy.
	NewLimiter(alg Algorithm, limits []Limit) (RateLimiter, error)
	// NewConcurrency returns a concurrency limiter of limit leases per key,
	// each expiring after lease unless released. retryAfter, when above 0,
	// is every denied Lease's RetryAfter (WithConcurrencyRetryAfter);
	// otherwise the store estimates it. NewConcurrency has validated limit
	// and lease.
	NewConcurrency(limit int, lease, retryAfter time.Duration) (ConcurrencyLimiter, error)
}

// New returns a Limiter that enforces every one of limits with alg, on store.
// A request passes only when every limit allows it, and then consumes from
// all of them; otherwise it consumes from none. New refuses an unknown
// algorithm, an empty list of limits, a limit alg cannot enforce (see
// ValidateFor) and two limits that alg treats as one (the window algorithms
// ignore Burst).
func New(store Store, alg Algorithm, limits ...Limit) (RateLimiter, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidOption)
	}
	if _, ok := algorithmCodes[alg]; !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownAlgorithm, alg)
	}
	if len(limits) == 0 {
		return nil, fmt.Errorf("%w: no limits given", ErrInvalidLimit)
	}
	seen := make(map[string]bool, len(limits))
	for _, l := range limits {
		if err := l.ValidateFor(alg); err != nil {
			return nil, err
		}
		// Two limits with one state would be charged twice per request.
		name := stateName(alg, l)
		if seen[name] {
			return nil, fmt.Errorf("%w: %s given twice for %s", ErrInvalidLimit, l, alg)
		}
		seen[name] = true
	}
	return store.NewLimiter(alg, append([]Limit(nil), limits...))
}

// algorithmCodes are the short names of the algorithms in Redis keys.
var algorithmCodes = map[Algorithm]string{
	FixedWindow:          "fw",
	SlidingWindowLog:     "swl",
	SlidingWindowCounter: "swc",
	TokenBucket:          "tb",
	LeakyBucket:          "lb",
}

// window is the span that quota(alg, l) refers to: see Result.Period.
func window(alg Algorithm, l Limit) time.Duration {
	if alg == TokenBucket || alg == LeakyBucket {
		us, _ := refillMicros(l) // within MaxRefill: New checked
		return usToDuration(us)
	}
	return l.Period
}

// quota is the number of units limit l holds under alg.
func quota(alg Algorithm, l Limit) int {
	if alg == TokenBucket || alg == LeakyBucket {
		return l.burst()
	}
	return l.Rate
}

// checkRequest validates the key and cost of one Allow call.
func checkRequest(alg Algorithm, limits []Limit, key string, cost int) error {
	if key == "" || len(key) > MaxKeyLength {
		return fmt.Errorf("%w: length %d, want 1 to %d bytes", ErrInvalidKey, len(key), MaxKeyLength)
	}
	if cost < 1 {
		return fmt.Errorf("%w: got %d", ErrInvalidCost, cost)
	}
	for _, l := range limits {
		if q := quota(alg, l); cost > q {
			return fmt.Errorf("%w: cost %d, quota %d (%s)", ErrCostExceedsLimit, cost, q, l)
		}
	}
	return nil
}
