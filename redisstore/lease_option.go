package redisstore

import (
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// The bounds of WithLeases's ttl: below minLeaseTTL a lease would be
// renewed about as often as the key is asked for; above maxLeaseTTL units
// a holder does not spend would be kept from the others for too long.
const (
	minLeaseTTL = 10 * time.Millisecond
	maxLeaseTTL = 10 * time.Minute
)

// leaseFraction bounds a lease: at most 1/leaseFraction of the limit's
// quota, and at least one unit (q in docs/redis.md).
const leaseFraction = 8

// WithLeases makes the store's limiters of the fixed window, the sliding
// window counter and both buckets decide from leases: a key's requests
// are decided in Redis as without leases until the key is busy on this
// instance (8 units asked for within a ttl), and then Redis grants this
// instance, in the background, a slice of the key's limit (a lease: units
// of the current window, or a bucket's tokens) that it spends in memory,
// for at most ttl and never past the window's end; it asks for the next
// lease before this one runs out, and gives back what it did not spend.
// A request that finds no units is decided in Redis, exactly, and never
// waits for a grant. Every unit leased is counted in Redis when it is
// granted, so the instances together admit no more than the limit per
// window (a bucket: no more than Burst + Rate × (t + ttl) in any span t).
// A lease is about what this instance asked for in the last ttl, at most
// an eighth of the limit, and at most what the key has left divided among
// the instances holding its leases. ttl must be from 10ms to 10 minutes.
//
// A limiter of several limits leases each limit on its own, as a limiter
// of that limit alone would, and admits a request from memory only when
// every limit's leases have units for it (spending from all or none);
// otherwise Redis decides it exactly, across its limits, as without
// leases, and when it is admitted the limits that lacked units ask for
// their next lease in the background. Each limit keeps its promise.
//
// The sliding window log decides in Redis, exactly, as without leases.
// Charge, Refund, Reserve and Peek go to Redis as without leases. See
// docs/redis.md, "Leased quotas".
func WithLeases(ttl time.Duration) Option {
	return redisOption(ttl >= minLeaseTTL && ttl <= maxLeaseTTL, func(r *redisConfig) { r.leaseTTL = ttl },
		"lease ttl %s must be from %s to %s", ttl, minLeaseTTL, maxLeaseTTL)
}

// leaseable reports whether a limiter of alg and limits decides from
// leases under WithLeases: of one limit or several, every one of the
// fixed window, of the sliding window counter counted in µs (unit 1: its
// windows' starts are times), or of either bucket.
//
// The sliding window log keeps deciding in Redis: a leased unit would be
// logged when it is granted, so it would leave the log a period after its
// grant rather than a period after the request that spent it, and the log
// could then admit more than its limit in a span of one period, the one
// promise it is chosen for.
func leaseable(alg algorithms.Algorithm, limits []algorithms.Limit) bool {
	if len(limits) == 0 {
		return false
	}
	for _, lim := range limits {
		switch alg {
		case algorithms.FixedWindow, algorithms.TokenBucket, algorithms.LeakyBucket:
		case algorithms.SlidingWindowCounter:
			if ratemath.ParamsFor(alg, lim).Unit != 1 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// leaseMost is the largest lease of a limit of quota units.
func leaseMost(quota int) int { return max(1, quota/leaseFraction) }
