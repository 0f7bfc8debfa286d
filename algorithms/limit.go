// Package algorithms decides whether a request may pass a rate limit.
//
// It offers five algorithms (fixed window, sliding window log, sliding
// window counter, token bucket and leaky bucket as a meter, GCRA), each
// running on a Store: atomically inside Redis, as one Lua script per
// decision (package redisstore), in process memory (package memstore), or
// in a store of your own. Every store gives the same answers for the same
// sequence of requests; a conformance suite (package storetest) holds them
// to it. This package holds what every store shares and imports none.
//
// The package knows nothing of HTTP: a key is any string that names who is
// asking, and the caller decides what to do with a Result.
package algorithms

import (
	"errors"
	"fmt"
	"math/bits"
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
	// ErrInvalidOption reports configuration that cannot be used: an
	// option, argument or key function that redlimit's constructors (of
	// this package, the stores, keyfunc and middleware) refuse, wrapped in
	// an error that names it.
	ErrInvalidOption = errors.New("redlimit: invalid option")
	// ErrInvalidAge is returned (wrapped) by Refund for a negative age.
	ErrInvalidAge = errors.New("algorithms: refund age must not be negative")
)

// MaxKeyLength is the longest key, in bytes, that Allow accepts.
const MaxKeyLength = 1024

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

// Validate reports whether alg can enforce the limit exactly. Every
// algorithm needs a Rate from 1 to MaxRate, a Period from one millisecond
// to MaxPeriod that is a whole number of microseconds, and a Burst from 0
// to MaxRate; beyond that, the sliding window log takes a Rate of at most
// MaxSlidingLogRate, and a bucket must refill from empty (Burst × Period /
// Rate) within MaxRefill. Every other limit is exact on every store: where
// microseconds would take a number past 2^53, the largest integer a Lua
// number holds exactly, the algorithm counts time in a coarser unit that
// divides the period (see the README's Limits section). New calls it for
// each limit; call it to check a configuration before building limiters.
// An algorithm this package does not implement is ErrUnknownAlgorithm.
func (l Limit) Validate(alg Algorithm) error {
	if !alg.known() {
		return fmt.Errorf("%w: %q", ErrUnknownAlgorithm, alg)
	}
	if err := l.validateAny(); err != nil {
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

// validateAny checks the bounds every algorithm shares (see Validate).
func (l Limit) validateAny() error {
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

// Refill is the time a bucket of l (TokenBucket, LeakyBucket) takes to
// refill from empty: Burst × Period / Rate, rounded up to the microsecond.
// It is 0 for a limit whose refill exceeds MaxRefill, which Validate
// refuses for the buckets.
func (l Limit) Refill() time.Duration {
	us, ok := refillMicros(l)
	if !ok || us > int64(maxRefill) {
		return 0
	}
	return time.Duration(us) * time.Microsecond
}

// Capacity is the most a bucket of l (TokenBucket, LeakyBucket) holds:
// Burst, or Rate when Burst is 0.
func (l Limit) Capacity() int {
	if l.Burst == 0 {
		return l.Rate
	}
	return l.Burst
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

// known reports whether a is one of the algorithms this package implements.
func (a Algorithm) known() bool {
	switch a {
	case FixedWindow, SlidingWindowLog, SlidingWindowCounter, TokenBucket, LeakyBucket:
		return true
	}
	return false
}

// All returns every Algorithm this package implements, in a slice of
// the caller's own.
func All() []Algorithm {
	return []Algorithm{FixedWindow, SlidingWindowLog, SlidingWindowCounter, TokenBucket, LeakyBucket}
}

// New returns a Limiter that enforces every one of limits with alg, on store.
// A request passes only when every limit allows it, and then consumes from
// all of them; otherwise it consumes from none. New refuses an unknown
// algorithm, an empty list of limits, a limit alg cannot enforce (see
// Validate) and two limits that alg treats as one (the window algorithms
// ignore Burst).
func New(store Store, alg Algorithm, limits ...Limit) (RateLimiter, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidOption)
	}
	if !alg.known() {
		return nil, fmt.Errorf("%w: %q", ErrUnknownAlgorithm, alg)
	}
	if len(limits) == 0 {
		return nil, fmt.Errorf("%w: no limits given", ErrInvalidLimit)
	}
	seen := make(map[limitID]bool, len(limits))
	for _, l := range limits {
		if err := l.Validate(alg); err != nil {
			return nil, err
		}
		// Two limits with one state would be charged twice per request.
		id := limitID{rate: l.Rate, period: l.Period}
		if alg == TokenBucket || alg == LeakyBucket {
			id.burst = l.Capacity()
		}
		if seen[id] {
			return nil, fmt.Errorf("%w: %s given twice for %s", ErrInvalidLimit, l, alg)
		}
		seen[id] = true
	}
	return store.NewLimiter(alg, append([]Limit(nil), limits...))
}

// refillMicros is the time a bucket of l takes to refill from empty,
// Burst × Period / Rate rounded up to the µs, exact for any limit that
// Validate accepts; ok is false when it does not fit an int64.
func refillMicros(l Limit) (us int64, ok bool) {
	hi, lo := bits.Mul64(uint64(l.Capacity()), uint64(l.Period.Microseconds()))
	r := uint64(l.Rate)
	if hi >= r {
		return 0, false
	}
	q, rem := bits.Div64(hi, lo, r)
	if rem > 0 {
		q++
	}
	if q > 1<<62 {
		return 0, false
	}
	return int64(q), true
}

// maxRefill bounds a bucket's refill time, so that a bucket's times stay
// exact and Result durations fit a time.Duration.
const maxRefill = MaxRefill / time.Microsecond

// limitID is what makes two limits one state under an algorithm: the
// window algorithms ignore Burst.
type limitID struct {
	rate, burst int
	period      time.Duration
}
