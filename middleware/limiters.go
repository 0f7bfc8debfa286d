package middleware

import (
	"context"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// The parts of algorithms.RateLimiter the middleware uses when a limiter
// has them: a limiter of the caller's own making may have only Allow.
type (
	describer interface {
		Policies() []algorithms.Policy
	}
	reserver interface {
		Reserve(ctx context.Context, key string, cost int, maxDelay time.Duration) (algorithms.Result, error)
	}
	refunder interface {
		Refund(ctx context.Context, key string, cost int, age time.Duration) (algorithms.Result, error)
	}
	charger interface {
		Charge(ctx context.Context, key string, cost int) (algorithms.Result, error)
	}
)
