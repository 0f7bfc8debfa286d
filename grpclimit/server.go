package grpclimit

import (
	"context"

	"google.golang.org/grpc"

	"github.com/redlimit/redlimit/algorithms"
)

// UnaryServerInterceptor returns an interceptor that rate-limits unary
// calls with limiter (or WithMethodLimiter's for the method) before their
// handler runs. A call that goes on carries the rate-limit fields as
// header metadata; a refused one ends with the status and trailers the
// package documentation lists, its handler never run.
//
// Configuration that no call could be served with is refused here, with
// an error wrapping algorithms.ErrInvalidOption: a nil limiter or option, WithSkip(nil),
// an unknown failure policy, a nil pointer as the Observer, a timeout or
// retry delay that is not positive, an invalid policy name or method.
func UnaryServerInterceptor(limiter algorithms.Limiter, opts ...Option) (grpc.UnaryServerInterceptor, error) {
	c, err := newConfig(limiter, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		a, _ := c.admit(ctx, info.FullMethod, req)
		if a.err != nil {
			if len(a.trailer) > 0 {
				_ = grpc.SetTrailer(ctx, a.trailer)
			}
			return nil, a.err
		}
		if len(a.header) > 0 {
			_ = grpc.SetHeader(ctx, a.header)
		}
		return handler(ctx, req)
	}, nil
}

// StreamServerInterceptor returns an interceptor that rate-limits streams
// with limiter (or WithMethodLimiter's for the method) when they open,
// before their handler runs, as UnaryServerInterceptor does calls; the cost
// function sees a nil request. With WithMessageLimiter, each message the
// stream then receives costs a unit of that limiter, and a refused message
// ends the stream with ResourceExhausted (see WithMessageLimiter). It
// refuses configuration as UnaryServerInterceptor does.
func StreamServerInterceptor(limiter algorithms.Limiter, opts ...Option) (grpc.StreamServerInterceptor, error) {
	c, err := newConfig(limiter, opts)
	if err != nil {
		return nil, err
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		a, who := c.admit(ss.Context(), info.FullMethod, nil)
		if a.err != nil {
			if len(a.trailer) > 0 {
				ss.SetTrailer(a.trailer)
			}
			return a.err
		}
		if len(a.header) > 0 {
			_ = ss.SetHeader(a.header)
		}
		if c.msgs == nil || who.key == "" {
			return handler(srv, ss)
		}
		ms := &messageStream{ServerStream: ss, c: c, key: messageNamespace + who.key, identity: who.identity}
		err := handler(srv, ms)
		if refused := ms.refusal(); refused != nil {
			return refused
		}
		return err
	}, nil
}
