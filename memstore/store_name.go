package memstore

import "github.com/redlimit/redlimit/algorithms"

// StoreName returns "memory": observers label decisions by the store that
// made them.
func (l *memoryLimiter) StoreName() string { return "memory" }

// Algorithm implements RateLimiter; a nil limiter has none, so CanReserve
// says no for it.
func (l *memoryLimiter) Algorithm() algorithms.Algorithm {
	if l == nil {
		return ""
	}
	return l.alg
}
