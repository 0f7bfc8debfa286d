package algorithms

import (
	"context"
	"time"
)

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

// StoreNamer is implemented by limiters that say which store decides for
// them ("memory", "redis"), so that observers can label decisions by
// store; the middleware's and grpclimit's observers ask for it.
type StoreNamer interface {
	StoreName() string
}

// DecisionBounder is implemented by limiters that bound each decision
// themselves: a Redis store's limiters, by the store's WithTimeout. A
// caller that sets a deadline of its own by default, as the middleware
// does, gives them at least this long, so that the store's setting is not
// cut short.
type DecisionBounder interface {
	DecisionTimeout() time.Duration
}
