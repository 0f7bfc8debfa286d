package middleware

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// DefaultTimeout bounds each decision unless WithTimeout says otherwise.
const DefaultTimeout = 100 * time.Millisecond

// DefaultBreakFor is how long the middleware stops asking a limiter that
// keeps failing, unless WithBreakFor says otherwise.
const DefaultBreakFor = time.Second

// DefaultPolicyName names the policy in the RateLimit fields and in the 429
// body unless WithPolicyName says otherwise.
const DefaultPolicyName = "default"

// ErrorPolicy decides what happens to a request when the limiter returns
// an error. Limiters made by algorithms.New on a Redis store do not return
// one when Redis fails: their store's redisstore.FailureMode decides.
type ErrorPolicy int

const (
	// PassOnError passes the request on, without rate-limit headers: while the
	// limiter fails there is no limit at all. Choose it only where a failed
	// limiter must never refuse a request.
	PassOnError ErrorPolicy = iota
	// RefuseOnError, the default, answers 503 Service Unavailable with
	// Retry-After: nothing passes that was not counted.
	RefuseOnError
)

// String returns "PassOnError" or "RefuseOnError".
func (p ErrorPolicy) String() string {
	switch p {
	case PassOnError:
		return "PassOnError"
	case RefuseOnError:
		return "RefuseOnError"
	}
	return "ErrorPolicy(" + strconv.Itoa(int(p)) + ")"
}

// ResetMode chooses the format of X-RateLimit-Reset.
type ResetMode int

const (
	// ResetEpoch sends the UTC epoch second, rounded up, at which the quota
	// is whole again, as GitHub does.
	ResetEpoch ResetMode = iota
	// ResetDelta sends the seconds from now, rounded up, until the quota is
	// whole again, as the early IETF drafts did.
	ResetDelta
)

// Option configures the middleware built by New.
type Option func(*config)

// WithKeyFunc sets how a request is mapped to the key it is counted under.
// The default is keyfunc.IP(). A key function that fails gets the request
// refused with 401 or 400 (see WithKeyErrorHandler); to fall back to
// another identity instead, use keyfunc.FirstOf. Nil restores the default.
func WithKeyFunc(kf keyfunc.KeyFunc) Option {
	return func(c *config) { c.keyFunc = kf }
}

// WithCost sets how many units of the quota a request consumes; the default
// is 1 for every request. A cost below 1 gets 400, a cost above the whole
// quota 413. Nil restores the default.
func WithCost(cost func(*http.Request) int) Option {
	return func(c *config) { c.cost = cost }
}

// WithLimiterFunc picks the limiter for each request, for plans such as free
// and paid tiers chosen by API key. It receives the request and the key the
// key function derived, so a plan can be looked up by the key (for
// keyfunc.APIKey, "key:" + keyfunc.HashAPIKey(raw)) without deriving it
// again. When it returns nil, the limiter given to New decides. Nil restores
// the default of always using New's limiter.
func WithLimiterFunc(pick func(r *http.Request, key string) algorithms.Limiter) Option {
	return func(c *config) { c.limiterFunc = pick }
}

// WithTimeout bounds each decision, the fallback's separately. Without it
// a decision gets DefaultTimeout, or longer when the limiter bounds its
// decisions itself for longer (algorithms.DecisionBounder: a Redis store's
// WithTimeout), so that the store's setting is not cut short. A timeout
// that is not positive is refused by New.
func WithTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout, c.timeoutSet = d, true }
}

// WithErrorPolicy sets what happens when the limiter (and the fallback, if
// any) returns an error: RefuseOnError, the default, or PassOnError.
func WithErrorPolicy(p ErrorPolicy) Option {
	return func(c *config) { c.policy = p }
}

// WithFallback sets a limiter that decides when the main one fails or times
// out, typically one on an in-memory store while Redis is unreachable. Its
// counts are its own, so during an outage each instance enforces the limit
// on its own. Nil removes the fallback.
func WithFallback(l algorithms.Limiter) Option {
	return func(c *config) { c.fallback = l }
}

// WithRouteScope sets whether each route counts apart (the default): the
// key is prefixed with the route pattern that matched the request (see
// WithRoutePattern), so two routes never share a counter even when their
// limiters are alike or the same, while every instance of an application
// still shares each route's counter. Mounted where no pattern is known yet
// (a top-level r.Use, a middleware around a whole mux), or with scoping
// off, the middleware counts all its requests under the key alone.
// ScopedKey builds a client's key on a route, for Peek and Reset.
func WithRouteScope(on bool) Option {
	return func(c *config) { c.routeScope = on }
}

// WithRoutePattern sets how the middleware reads the pattern of the route
// a request matched, for WithRouteScope; "" means none is known. The
// default reads r.Pattern, which http.ServeMux fills and so does chi from
// v5.5 on, and drops a trailing "*" wildcard segment ("/g/*" counts as
// "/g"), so that a chi group's middleware counts the whole group as one
// whatever the path; a chi route of its own ending in "/*" then shares its
// parent's count (the stricter side). chiroute.Pattern (package
// middleware/chiroute) reads chi's routing context instead and keeps such
// a route apart, as does a function of your own for another router. A
// nil function is refused by New.
func WithRoutePattern(pattern func(r *http.Request) string) Option {
	return func(c *config) { c.routePattern = pattern }
}

// WithBreakFor sets how long the middleware stops asking a limiter that
// keeps returning errors (default DefaultBreakFor; 0 turns the breaker off).
// It opens on evidence, not on one error: five failures in a row, or half
// of at least twenty decisions within a second. While it is open requests
// go straight to the fallback or the failure policy; then one request
// probes the limiter: its success closes the breaker, its failure opens it
// again. Refusals of a key or cost, and requests whose client went away,
// are not failures. A negative time is refused by New.
func WithBreakFor(breakFor time.Duration) Option {
	return func(c *config) { c.breakFor = breakFor }
}

// WithCountCredentialFailures sets whether a request whose key function
// fails for want of a valid credential is charged, under the route's
// limiter and WithCredentialFailureKey's key, before its 401 (the default),
// so that it gets 429 once that quota is spent; false answers 401 at once.
func WithCountCredentialFailures(on bool) Option {
	return func(c *config) { c.countCredentialFailures = on }
}

// WithCredentialFailureKey sets the key failed credentials are charged
// under; the default is keyfunc.IP(). Behind proxies, give it the same
// keyfunc.TrustProxies as the main key function, or every client's failures
// share the proxy's quota. Its keys are counted in a namespace of their
// own, apart from the same client's other requests. Nil restores the
// default.
func WithCredentialFailureKey(kf keyfunc.KeyFunc) Option {
	return func(c *config) { c.credentialKey = kf }
}

// WithUnavailableRetryAfter sets the Retry-After sent with the 503 of
// RefuseOnError, rounded up to whole seconds and at least 1; the default is
// one second.
func WithUnavailableRetryAfter(d time.Duration) Option {
	return func(c *config) { c.unavailableRetry = d }
}

// WithLogger sets the logger for limiter errors; the default is
// slog.Default(). Nil restores the default.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithLegacyHeaders turns the X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset headers on (the default) or off.
func WithLegacyHeaders(on bool) Option {
	return func(c *config) { c.legacy = on }
}

// WithIETFHeaders turns the RateLimit-Policy and RateLimit fields on (the
// default) or off.
func WithIETFHeaders(on bool) Option {
	return func(c *config) { c.ietf = on }
}

// WithResetMode sets the format of X-RateLimit-Reset: ResetEpoch, the
// default, or ResetDelta.
func WithResetMode(m ResetMode) Option {
	return func(c *config) { c.resetMode = m }
}

// WithPolicyName names the policy in the RateLimit fields and in the
// "violated-policies" of the 429 body; the default is DefaultPolicyName.
// The name must be 1 to 64 printable ASCII characters (space to tilde), as a
// Structured Field string allows; New refuses others (see New), since the
// name is fixed when the program is written.
func WithPolicyName(name string) Option {
	return func(c *config) { c.policyName = name }
}

// WithDeniedHandler replaces the 429 problem response. The handler runs with
// the rate-limit headers, Retry-After and Cache-Control: no-store already
// set, and must write the status and body itself. Nil restores the default.
func WithDeniedHandler(h func(w http.ResponseWriter, r *http.Request, res algorithms.Result)) Option {
	return func(c *config) { c.denied = h }
}

// WithKeyErrorHandler replaces the response to a request whose key function
// failed. The handler receives the key function's error, which may describe
// a credential: it must not echo it to the client. Nil restores the default,
// which answers 401 for keyfunc's credential errors and 400 for any other.
func WithKeyErrorHandler(h func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(c *config) { c.keyError = h }
}
