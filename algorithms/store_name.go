package algorithms

// StoreName returns "memory": observers label decisions by the store that
// made them.
func (l *memoryLimiter) StoreName() string { return "memory" }

// StoreName returns "redis": observers label decisions by the store that
// made them.
func (l *redisLimiter) StoreName() string { return "redis" }
