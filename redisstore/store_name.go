package redisstore

import "github.com/redlimit/redlimit/algorithms"

// StoreName returns "redis": observers label decisions by the store that
// made them.
func (l *redisLimiter) StoreName() string { return "redis" }

// Algorithm implements RateLimiter; a nil limiter has none, so CanReserve
// says no for it.
func (l *redisLimiter) Algorithm() algorithms.Algorithm {
	if l == nil {
		return ""
	}
	return l.alg
}
