package algorithms

import (
	"time"
)

// Reservations: shaping traffic instead of refusing it. A request that the
// bucket algorithms would admit within a delay is admitted now, its units
// taken now, and told to proceed after the delay: the leaky bucket's
// backlog may pass its capacity, and the token bucket's level go below
// zero, by as much as drains (refills) within the delay. The requests after
// it find the bucket that much fuller, so a reservation is charged exactly
// like a request that waited and then passed. The window algorithms have
// no such measure (a window's count cannot be spent before the window it
// belongs to opens) and refuse reservations.

// MaxDelay is the longest delay a reservation may be asked to wait.
const MaxDelay = time.Hour

// CanReserve reports whether a can reserve (RateLimiter.Reserve): the
// buckets, TokenBucket and LeakyBucket, can. A limiter l can when it is a
// RateLimiter whose l.Algorithm().CanReserve().
func (a Algorithm) CanReserve() bool { return a == TokenBucket || a == LeakyBucket }
