package memstore

import (
	"context"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// Reserve implements RateLimiter. Like Allow it never waits, and fails only
// for invalid requests.
func (l *memoryLimiter) Reserve(_ context.Context, key string, cost int, maxDelay time.Duration) (algorithms.Result, error) {
	if err := ratemath.CheckReserve(l.alg, maxDelay); err != nil {
		return algorithms.Result{}, err
	}
	if err := ratemath.CheckRequest(l.alg, l.limits, key, cost); err != nil {
		return algorithms.Result{}, err
	}
	return l.decide(key, cost, maxDelay.Microseconds()), nil
}
