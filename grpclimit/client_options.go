package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/middleware"
)

// DefaultMaxDelay is the longest a client interceptor holds a call for
// its turn unless WithMaxDelay says otherwise.
const DefaultMaxDelay = 30 * time.Second

// ClientOption configures the client interceptors.
type ClientOption func(*clientConfig)

// clientConfig is the client interceptors' configuration.
type clientConfig struct {
	limiter  algorithms.RateLimiter
	key      func(ctx context.Context, target, fullMethod string) string
	cost     func(ctx context.Context, fullMethod string, req any) int
	maxDelay time.Duration
	refund   bool
	failure  middleware.ErrorPolicy
	timeout  time.Duration
}

// WithClientKey sets the key a call is paced under, from the connection's
// target (grpc.ClientConn.Target) and the full method name. The default,
// "upstream:" followed by the target, paces every call to one upstream
// together, across every client sharing the limiter's store. Nil restores
// the default.
func WithClientKey(key func(ctx context.Context, target, fullMethod string) string) ClientOption {
	return func(c *clientConfig) { c.key = key }
}

// WithClientCost sets how many units a call takes (default 1); req is a
// unary call's request, nil for a stream. Nil restores the default.
func WithClientCost(cost func(ctx context.Context, fullMethod string, req any) int) ClientOption {
	return func(c *clientConfig) { c.cost = cost }
}

// WithMaxDelay sets the longest a call waits for its turn (default
// DefaultMaxDelay), above 0 and at most algorithms.MaxDelay; a call whose
// turn is further off, or after its context's deadline, is not sent: it
// fails at once with ResourceExhausted and RetryInfo, taking nothing.
func WithMaxDelay(d time.Duration) ClientOption {
	return func(c *clientConfig) { c.maxDelay = d }
}

// WithRefundOnCancel sets whether a call whose context ends while it waits
// gives its units back (the default), so that a call never sent costs the
// upstream quota nothing. The bucket cannot tell the slot given back from
// those reserved after it, so the calls reserved later may then start up
// to that slot's interval sooner than the bucket's strict schedule: the
// rate over any longer span is kept, but a burst may pass the bucket's by
// the units given back. With false, as the HTTP middleware's WithDelay,
// the slot is kept and the schedule strict.
func WithRefundOnCancel(on bool) ClientOption {
	return func(c *clientConfig) { c.refund = on }
}

// WithClientErrorPolicy sets what a call does when the limiter returns an
// error: middleware.RefuseOnError (the default) fails it with Unavailable,
// without sending it; middleware.PassOnError sends it unpaced.
func WithClientErrorPolicy(p middleware.ErrorPolicy) ClientOption {
	return func(c *clientConfig) { c.failure = p }
}

// WithClientTimeout bounds the limiter's decision (default
// middleware.DefaultTimeout; a Redis store's limiters keep their own bound
// when it is longer); it must be positive. The wait for the turn is not
// part of it.
func WithClientTimeout(d time.Duration) ClientOption {
	return func(c *clientConfig) { c.timeout = d }
}

// newClientConfig applies opts over the defaults and refuses what no call
// could be paced with.
func newClientConfig(limiter algorithms.Limiter, opts []ClientOption) (*clientConfig, error) {
	c := &clientConfig{
		maxDelay: DefaultMaxDelay,
		refund:   true,
		failure:  middleware.RefuseOnError,
		timeout:  middleware.DefaultTimeout,
	}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: client option %d is nil", algorithms.ErrInvalidOption, i)
		}
		o(c)
	}
	var err error
	switch {
	case isNil(limiter) || !canReserve(limiter):
		err = errors.New("the limiter cannot reserve (only the token and leaky buckets of algorithms.New can)")
	case c.maxDelay <= 0 || c.maxDelay > algorithms.MaxDelay:
		err = fmt.Errorf("WithMaxDelay(%s): the delay must be above 0 and at most %s", c.maxDelay, algorithms.MaxDelay)
	case c.failure != middleware.PassOnError && c.failure != middleware.RefuseOnError:
		err = fmt.Errorf("unknown failure policy %d", int(c.failure))
	case c.timeout <= 0:
		err = fmt.Errorf("WithClientTimeout(%s): the timeout must be positive", c.timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", algorithms.ErrInvalidOption, err)
	}
	c.limiter = limiter.(algorithms.RateLimiter)
	if c.key == nil {
		c.key = func(_ context.Context, target, _ string) string { return "upstream:" + target }
	}
	return c, nil
}
