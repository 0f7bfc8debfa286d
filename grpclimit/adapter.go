package grpclimit

import (
	"context"

	"google.golang.org/grpc"

	"github.com/redlimit/redlimit/algorithms"
)

// MiddlewareLimiter adapts a limiter to go-grpc-middleware v2's
// ratelimit.Limiter interface (Limit(ctx) error), for services already
// built on its interceptors:
//
//	l, err := grpclimit.NewMiddlewareLimiter(limiter, grpclimit.WithKeyFunc(kf))
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(ratelimit.UnaryServerInterceptor(l)))
//
// It decides as UnaryServerInterceptor does and sends the same metadata,
// but that interceptor answers every error with ResourceExhausted and a
// message of its own around the error's text: the details (RetryInfo,
// QuotaFailure) are lost, and an Unauthenticated or Unavailable answer
// becomes ResourceExhausted. Prefer this package's interceptors where you
// can.
type MiddlewareLimiter struct {
	c *config
}

// NewMiddlewareLimiter returns a MiddlewareLimiter over limiter. It refuses
// configuration as UnaryServerInterceptor does; WithMessageLimiter does
// not apply, and the cost function sees a nil request.
func NewMiddlewareLimiter(limiter algorithms.Limiter, opts ...Option) (*MiddlewareLimiter, error) {
	c, err := newConfig(limiter, opts)
	if err != nil {
		return nil, err
	}
	return &MiddlewareLimiter{c: c}, nil
}

// Limit decides the server call whose context ctx is (grpc.Method names its
// method). It returns nil when the call may go on, having set the
// rate-limit header metadata, or the status error that refuses it, having
// set the refusal's trailers; the error's text holds no internal error or
// credential.
func (m *MiddlewareLimiter) Limit(ctx context.Context) error {
	method, _ := grpc.Method(ctx)
	a, _ := m.c.admit(ctx, method, nil)
	if a.err != nil {
		if len(a.trailer) > 0 {
			_ = grpc.SetTrailer(ctx, a.trailer)
		}
		return a.err
	}
	if len(a.header) > 0 {
		_ = grpc.SetHeader(ctx, a.header)
	}
	return nil
}
