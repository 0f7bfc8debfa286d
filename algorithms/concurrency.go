package algorithms

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Bounds of a concurrency limit, checked by NewConcurrency.
const (
	// MaxConcurrency is the highest max: each lease held is a member of a
	// sorted set in Redis (about 80 bytes), so a larger bound would let one
	// key grow without a useful limit.
	MaxConcurrency = 100_000
	// MinLease and MaxLease bound the lease: shorter than a round trip to
	// Redis is a mistake, and a lease left by a crashed instance holds its
	// slot until it expires, so a day is the most that is of any use.
	MinLease = time.Millisecond
	MaxLease = 24 * time.Hour
)

// DefaultConcurrencyRetryAfter is a denied Lease's RetryAfter before the
// limiter has seen any lease released: one second.
const DefaultConcurrencyRetryAfter = time.Second

// ConcurrencyLimiter limits how many requests for one key are in flight at
// once, across every instance that shares its store. NewConcurrency makes
// one.
type ConcurrencyLimiter interface {
	// Acquire takes one of key's slots if one is free. The returned Lease
	// says whether it did; an allowed Lease must be released (Release)
	// when the request ends, or its slot stays taken until the lease
	// expires. It returns ErrInvalidKey (wrapped) for an empty key or one
	// over MaxKeyLength, and the context's error when the context was
	// canceled before Redis answered; a Redis store's failures are decided
	// by its FailureMode, never returned.
	Acquire(ctx context.Context, key string) (*Lease, error)
}

// Lease is the answer to Acquire: a slot taken, or the reason none was.
type Lease struct {
	// Allowed reports whether a slot was taken: the request may go on and
	// must call Release when it ends.
	Allowed bool
	// Limit is the most requests in flight for the key: the limit, or this
	// instance's share of it when Decider is DecidedLocally.
	Limit int
	// InFlight is how many leases the key holds, this one included when
	// Allowed.
	InFlight int
	// Remaining is Limit - InFlight, never negative.
	Remaining int
	// RetryAfter is 0 when Allowed; otherwise an estimate of when a slot
	// frees: the typical time this limiter has seen leases held (an
	// exponentially weighted mean of its releases, DefaultConcurrencyRetryAfter
	// before the first, or WithConcurrencyRetryAfter's fixed value), but no
	// later than the earliest held lease expires. A slot may free sooner or
	// later: requests in flight end when they end.
	RetryAfter time.Duration
	// Decider says what decided: the store, or a Redis store's stand-in
	// while Redis could not (DecidedLocally, DecidedFailOpen,
	// DecidedFailClosed), as for Result.
	Decider Decider

	// Owner, set by the store that granted the lease, gives its slot
	// back; Release calls it at most once. It is nil when nothing was
	// taken. A store can make it the struct the Lease is a field of, so
	// that a lease costs one allocation.
	Owner interface {
		Release(ctx context.Context) error
	}

	released atomic.Bool
}

// Release gives the slot back. It is safe to call more than once and on a
// Lease that was not allowed (both do nothing), and from any goroutine. A
// lease taken in Redis is removed there with one command within the store's
// timeout; if Redis cannot be reached the error is returned, and the Redis
// store sends the release again until Redis answers (see
// up to 65,536 leases a store; a lease it cannot take expires on its own
// after the lease duration). A lease taken locally, while Redis could not
// decide, is released locally; a lease Redis may hold for the Acquire's
// call that failed or was given up on is removed from Redis by the store
// as soon as Redis answers, whenever the Lease is released: it could
// otherwise hold a slot for the whole lease.
func (l *Lease) Release(ctx context.Context) error {
	if l == nil || l.Owner == nil || !l.released.CompareAndSwap(false, true) {
		return nil
	}
	return l.Owner.Release(ctx)
}

// ConcurrencyOption configures NewConcurrency.
type ConcurrencyOption func(*concConfig)

type concConfig struct {
	retryAfter time.Duration // 0: observed
	errs       []error
}

// WithConcurrencyRetryAfter makes every denied Lease's RetryAfter d (at
// most the time until the earliest held lease expires) instead of the
// typical hold time observed. d must be positive.
func WithConcurrencyRetryAfter(d time.Duration) ConcurrencyOption {
	return func(c *concConfig) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: concurrency retry-after %s must be positive", ErrInvalidOption, d))
			return
		}
		c.retryAfter = d
	}
}

// NewConcurrency returns a ConcurrencyLimiter that lets at most limit
// requests per key be in flight at once, on store. A lease that is never
// released (its instance crashed) frees its slot after lease, so lease
// should exceed the longest request (a server's write timeout, say).
//
// On a Redis store every instance shares the limit: one script call per
// Acquire, one ZREM per Release, on Redis's clock. When Redis cannot decide
// in time the store's FailureMode decides: by default (FailLocal) a
// concurrency limit in this process's memory with limit divided by the
// store's WithInstances (at least 1), so the limit is never absent;
// FailOpen lets the request through uncounted and FailClosed refuses it.
//
// Concurrency limiters on one store share each key's leases whatever their
// limits, each counting them all against its own: a rollout that changes
// the limit runs old and new instances on one lease set, never the two
// limits side by side. Give unrelated concurrency limits distinct keys (or
// stores with distinct prefixes). It returns ErrInvalidLimit for a limit outside 1 to MaxConcurrency or a lease
// outside MinLease to MaxLease, and ErrInvalidOption for a nil store, a
// store built with invalid options, or an invalid option.
func NewConcurrency(store Store, limit int, lease time.Duration, opts ...ConcurrencyOption) (ConcurrencyLimiter, error) {
	var cfg concConfig
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: concurrency option %d is nil", ErrInvalidOption, i)
		}
		o(&cfg)
	}
	if len(cfg.errs) > 0 {
		return nil, cfg.errs[0]
	}
	if limit < 1 || limit > MaxConcurrency {
		return nil, fmt.Errorf("%w: concurrency %d must be from 1 to %d", ErrInvalidLimit, limit, MaxConcurrency)
	}
	if lease < MinLease || lease > MaxLease || lease%time.Microsecond != 0 {
		return nil, fmt.Errorf("%w: lease %s must be from %s to %s in whole microseconds", ErrInvalidLimit, lease, MinLease, MaxLease)
	}
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidOption)
	}
	return store.NewConcurrency(limit, lease, cfg.retryAfter)
}
