package algorithms

// StoreName returns "memory": observers label decisions by the store that
// made them.
func (l *memoryLimiter) StoreName() string { return "memory" }

// StoreName returns "redis": observers label decisions by the store that
// made them.
func (l *redisLimiter) StoreName() string { return "redis" }

// Algorithm implements RateLimiter; a nil limiter has none, so CanReserve
// says no for it.
func (l *memoryLimiter) Algorithm() Algorithm {
	if l == nil {
		return ""
	}
	return l.alg
}

// Algorithm implements RateLimiter; a nil limiter has none, so CanReserve
// says no for it.
func (l *redisLimiter) Algorithm() Algorithm {
	if l == nil {
		return ""
	}
	return l.alg
}
