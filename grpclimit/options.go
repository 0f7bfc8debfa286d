package grpclimit

import (
	"context"
	"log/slog"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// Option configures the server interceptors and NewMiddlewareLimiter.
type Option func(*config)

// WithKeyFunc sets how a call is mapped to the key it is counted under; the
// default is keyfunc.IP(), the peer's address. The key function sees the
// call as CallRequest builds it: the peer's address as RemoteAddr, the
// metadata as headers (so keyfunc.TrustProxies reads x-forwarded-for from
// trusted peers only, keyfunc.APIKey a metadata key, jwtkey.Subject the
// authorization metadata) and the full method name as the pattern. Key API
// keys only with keyfunc.KnownAPIKey. Nil restores the default.
func WithKeyFunc(kf keyfunc.KeyFunc) Option {
	return func(c *config) { c.keyFunc = kf }
}

// WithCost sets how many units of the quota a call consumes; the default is
// 1. req is the request message of a unary call, nil when a stream opens.
// A cost below 1 gets InvalidArgument; one above the whole quota gets
// ResourceExhausted without RetryInfo. Nil restores the default.
func WithCost(cost func(ctx context.Context, fullMethod string, req any) int) Option {
	return func(c *config) { c.cost = cost }
}

// WithMethodLimiter limits the calls of one method ("/pkg.Service/Method")
// with l instead of the interceptor's limiter, under the policy name policy
// (see WithPolicyName). A method given twice keeps the last; an invalid
// name, a nil limiter or a method not starting with '/' is refused.
func WithMethodLimiter(fullMethod, policy string, l algorithms.Limiter) Option {
	return func(c *config) {
		c.methodOrder = append(c.methodOrder, methodLimiter{fullMethod, policy, l})
	}
}

// WithMethodScope sets whether each method counts apart (the default): the
// key is prefixed with the full method name, as the HTTP middleware scopes
// keys by route (middleware.ScopedKey(fullMethod, key) is the key, for Peek
// and Reset). With false, every method the interceptor sees shares the
// key's counter.
func WithMethodScope(on bool) Option {
	return func(c *config) { c.scope = on }
}

// WithSkip exempts the calls for which skip returns true: no decision, no
// count, no metadata, before the key function runs (so a health check needs
// no credential). The Observer hears middleware.OutcomeSkipped. Base it on
// the method or on what the client cannot forge, never on metadata a client
// sends. A nil skip is refused.
func WithSkip(skip func(ctx context.Context, fullMethod string) bool) Option {
	return func(c *config) { c.skip, c.skipSet = skip, true }
}

// WithShadow turns shadow mode on: every call is decided and counted as
// usual, but none is refused, and no rate-limit metadata is sent; a call the
// limit would have refused is reported as middleware.OutcomeShadowDenied
// and logged. Key errors, invalid costs and failures pass on too.
func WithShadow(on bool) Option {
	return func(c *config) { c.shadow = on }
}

// WithErrorPolicy sets what happens to a call when the limiter returns an
// error: middleware.RefuseOnError (the default) answers Unavailable,
// middleware.PassOnError lets it through uncounted, without metadata. Limiters
// of algorithms.New on a Redis store do not return errors when Redis fails:
// their store's failure mode decides.
func WithErrorPolicy(p middleware.ErrorPolicy) Option {
	return func(c *config) { c.failure = p }
}

// WithObserver sets an Observer of every call's outcome, the HTTP
// middleware's interface (package metrics implements it with Prometheus);
// its BreakerChanged is never called, there being no breaker here. Nil, the
// default, observes nothing.
func WithObserver(o middleware.Observer) Option {
	return func(c *config) { c.observer = o }
}

// WithPolicyName names the interceptor limiter's policy in the ratelimit
// fields and in QuotaFailure (default middleware.DefaultPolicyName): 1 to
// 64 printable ASCII characters.
func WithPolicyName(name string) Option {
	return func(c *config) { c.policyName = name }
}

// WithLegacyFields turns the x-ratelimit-limit, x-ratelimit-remaining and
// x-ratelimit-reset metadata on (the default) or off.
func WithLegacyFields(on bool) Option {
	return func(c *config) { c.legacy = on }
}

// WithIETFFields turns the ratelimit-policy and ratelimit metadata on (the
// default) or off.
func WithIETFFields(on bool) Option {
	return func(c *config) { c.ietf = on }
}

// WithTimeout bounds each decision (default middleware.DefaultTimeout, or a
// Redis store's own timeout, whichever is longer, when not set). A timeout
// that is not positive is refused.
func WithTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout, c.timeoutSet = d, true }
}

// WithUnavailableRetryAfter sets the retry-after and
// grpc-retry-pushback-ms of an Unavailable answer (default one second).
// It must be positive.
func WithUnavailableRetryAfter(d time.Duration) Option {
	return func(c *config) { c.unavailableAfter = d }
}

// WithMessageLimiter limits the messages a stream receives: each RecvMsg
// costs one unit of l under the stream's key (in a namespace of its own,
// apart from the calls' count). A message refused ends the stream with
// ResourceExhausted, whatever the handler returns. The stream interceptor
// only applies it; a nil limiter is refused.
func WithMessageLimiter(l algorithms.Limiter) Option {
	return func(c *config) { c.messages, c.messagesSet = l, true }
}

// WithLogger sets the logger of limiter failures and shadow refusals
// (default slog.Default()), which logs at most once a second, with a hash
// of the key rather than the key. Nil restores the default.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithClock sets the clock x-ratelimit-reset is counted from (default
// time.Now), for tests with storetest.ManualClock. A nil clock is refused.
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.now, c.nowSet = now, true }
}
