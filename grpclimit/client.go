package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/middleware"
)

// UnaryClientInterceptor returns an interceptor that paces outbound unary
// calls with limiter, a token or leaky bucket of algorithms.New
// (Algorithm.CanReserve), so that every client sharing its store keeps
// within an upstream's quota together: each call reserves its units
// (RateLimiter.Reserve) and waits the reservation's delay before it is
// sent. A call whose context ends while it waits is not sent, fails with
// the context's status and gives its units back (see WithRefundOnCancel);
// one whose turn is further off than WithMaxDelay or its deadline fails at
// once with ResourceExhausted and RetryInfo, never sent and taking nothing.
//
// It refuses, with an error wrapping algorithms.ErrInvalidOption, a limiter that
// cannot reserve, a nil option and the settings the options refuse.
func UnaryClientInterceptor(limiter algorithms.Limiter, opts ...ClientOption) (grpc.UnaryClientInterceptor, error) {
	c, err := newClientConfig(limiter, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if err := c.pace(ctx, cc.Target(), method, req); err != nil {
			return err
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}, nil
}

// StreamClientInterceptor is UnaryClientInterceptor for streams: a stream
// waits its turn before it opens, and its cost function sees a nil
// request.
func StreamClientInterceptor(limiter algorithms.Limiter, opts ...ClientOption) (grpc.StreamClientInterceptor, error) {
	c, err := newClientConfig(limiter, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if err := c.pace(ctx, cc.Target(), method, nil); err != nil {
			return nil, err
		}
		return streamer(ctx, desc, cc, method, opts...)
	}, nil
}

// pace reserves a call's units and waits its turn. It returns nil when the
// call may be sent, or the status it fails with.
func (c *clientConfig) pace(ctx context.Context, target, method string, req any) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	key := c.key(ctx, target, method)
	cost := 1
	if c.cost != nil {
		cost = c.cost(ctx, method, req)
	}
	maxDelay := c.maxDelay
	if dl, ok := ctx.Deadline(); ok {
		// A turn after the deadline would be waited for in vain.
		maxDelay = max(min(maxDelay, time.Until(dl)), 0)
	}
	res, err := c.reserve(ctx, key, cost, maxDelay)
	if err != nil {
		return c.reserveFailed(ctx, err)
	}
	switch {
	case res.Decider == algorithms.DecidedFailOpen:
		return nil
	case res.Decider == algorithms.DecidedFailClosed:
		return status.Error(codes.Unavailable, "the client rate limiter cannot decide")
	case !res.Allowed:
		return notYet(res.RetryAfter)
	case res.Delay <= 0:
		return nil
	}
	reserved := time.Now()
	t := time.NewTimer(res.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
	}
	if c.refund {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		defer cancel()
		_, _ = c.limiter.Refund(rctx, key, cost, time.Since(reserved))
	}
	return status.FromContextError(ctx.Err()).Err()
}

// reserve asks the limiter within the decision's timeout.
func (c *clientConfig) reserve(ctx context.Context, key string, cost int, maxDelay time.Duration) (algorithms.Result, error) {
	if b, ok := c.limiter.(algorithms.DecisionBounder); ok && c.timeout <= b.DecisionTimeout() {
		return c.limiter.Reserve(ctx, key, cost, maxDelay)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.limiter.Reserve(ctx, key, cost, maxDelay)
}

// reserveFailed turns the limiter's error into the call's status, or nil
// to send the call under FailOpen.
func (c *clientConfig) reserveFailed(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, algorithms.ErrCostExceedsLimit):
		return status.Error(codes.ResourceExhausted, "the call's cost exceeds the client's whole quota")
	case errors.Is(err, algorithms.ErrInvalidKey), errors.Is(err, algorithms.ErrInvalidCost):
		return status.Error(codes.InvalidArgument, "the client rate limiter refused the call's key or cost")
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case c.failure == middleware.PassOnError:
		return nil
	}
	return status.Error(codes.Unavailable, "the client rate limiter cannot decide")
}

// notYet is the status of a call whose turn is too far off.
func notYet(after time.Duration) error {
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("client rate limit: the call's turn is %s away", after))
	return withDetails(st, &errdetails.RetryInfo{RetryDelay: durationpb.New(after)}).Err()
}
