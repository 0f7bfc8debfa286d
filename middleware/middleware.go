// Package middleware rate-limits HTTP requests: it wraps any http.Handler,
// so it mounts on http.ServeMux and on chi alike.
//
// For each request it derives a key (who is asking) with a keyfunc.KeyFunc,
// asks an algorithms.Limiter for a decision within a bounded time, and then
// either passes the request on or answers 429 Too Many Requests.
//
//	mw := middleware.New(limiter,
//		middleware.WithKeyFunc(keyfunc.FirstOf(keyfunc.APIKey("X-API-Key"), keyfunc.IP())),
//	)
//	mux.Handle("/search", mw(searchHandler))   // net/http
//	r.With(mw).Get("/search", search)          // chi
//
// # Headers
//
// Every response the limiter decided on carries, on passes and on denials:
//
//	X-RateLimit-Limit: 100        the quota (Result.Limit)
//	X-RateLimit-Remaining: 42     what is left, never negative
//	X-RateLimit-Reset: 1767225600 when the quota is whole again: UTC epoch
//	                              seconds, rounded up (GitHub's meaning), or
//	                              seconds from now with WithResetMode(ResetDelta)
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=42;t=17
//
// The last two are the Structured Fields of the IETF draft
// draft-ietf-httpapi-ratelimit-headers-11: q is the quota, w the window in
// whole seconds (rounded up, at least 1), r the remaining quota and t the
// seconds, rounded up, until the quota is whole again. On a denial t is
// instead the Retry-After value, so that Retry-After never points earlier
// than t, as the draft asks. WithLegacyHeaders and WithIETFHeaders turn
// either family off; WithPolicyName names the policy.
//
// # Statuses
//
// The middleware answers with RFC 9457 problem details
// (application/problem+json, Cache-Control: no-store) in these cases, and
// never with the text of an internal error:
//
//	429 Too Many Requests   the limit is exhausted; Retry-After in whole
//	                        seconds, rounded up, at least 1; the problem type
//	                        is the IANA quota-exceeded type with
//	                        "violated-policies"
//	401 Unauthorized        the key function failed for want of a valid
//	                        credential (keyfunc's credential errors); with
//	                        WWW-Authenticate
//	400 Bad Request         the key function failed otherwise, the key was
//	                        empty or too long, or the request's cost is below 1
//	413 Content Too Large   the request's cost exceeds the whole quota, so it
//	                        could never pass
//	503 Service Unavailable the limiter failed or timed out under FailClosed;
//	                        Retry-After 1 (WithUnavailableRetryAfter)
//
// # Failures
//
// Each decision gets its own deadline (WithTimeout, 100 ms by default); the
// limiter must honour its context. When it fails or runs out of time, the
// optional fallback limiter (WithFallback) decides instead; when there is
// none, or it fails too, the failure policy applies. After a failure the
// middleware stops asking the limiter for a while (WithBreaker, one second
// by default), so an outage does not cost every request the whole timeout;
// then one request tries it again. The policies: FailOpen (the default)
// passes the request on without rate-limit headers, FailClosed answers 503.
// Failures are logged with log/slog, at most once a second per middleware,
// with a short hash of the key instead of the key. For Redis, give the
// go-redis client ContextTimeoutEnabled so a hung server cannot outlast the
// deadline.
//
// # Per-route limits
//
// Each route counts apart: the middleware prefixes the key with the route
// pattern that matched (chi's, or http.ServeMux's), so two routes never
// share a counter, whether their limiters are alike or one and the same,
// while every instance of the application shares each route's counter.
// Inside r.Route(..., func(r chi.Router) { r.Use(mw) }) the pattern known
// is the group's, so the group counts as one. WithRouteScope(false) counts
// everything a middleware sees under the key alone.
package middleware

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// DefaultTimeout bounds each decision unless WithTimeout says otherwise.
const DefaultTimeout = 100 * time.Millisecond

// DefaultBreakFor is how long the middleware stops asking a failed limiter,
// unless WithBreaker says otherwise.
const DefaultBreakFor = time.Second

// DefaultPolicyName names the policy in the RateLimit fields and in the 429
// body unless WithPolicyName says otherwise.
const DefaultPolicyName = "default"

// FailurePolicy decides what happens to a request when the limiter fails.
type FailurePolicy int

const (
	// FailOpen passes the request on, without rate-limit headers: an outage
	// of the limiter's store does not become an outage of the service.
	FailOpen FailurePolicy = iota
	// FailClosed answers 503 Service Unavailable with Retry-After: nothing
	// passes that was not counted.
	FailClosed
)

// String returns "FailOpen" or "FailClosed".
func (p FailurePolicy) String() string {
	switch p {
	case FailOpen:
		return "FailOpen"
	case FailClosed:
		return "FailClosed"
	}
	return "FailurePolicy(" + strconv.Itoa(int(p)) + ")"
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

// WithTimeout bounds each decision, the fallback's separately; the default
// is DefaultTimeout. New panics on a timeout that is not positive.
func WithTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d }
}

// WithFailurePolicy sets what happens when the limiter (and the fallback, if
// any) fails or times out: FailOpen, the default, or FailClosed.
func WithFailurePolicy(p FailurePolicy) Option {
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
// key is prefixed with the route pattern that matched the request (chi's,
// or http.ServeMux's r.Pattern), so two routes never share a counter even
// when their limiters are alike or the same, while every instance of an
// application still shares each route's counter. Mounted where no pattern
// is known yet (a top-level r.Use, a middleware around a whole mux), or
// with scoping off, the middleware counts all its requests under the key
// alone.
func WithRouteScope(on bool) Option {
	return func(c *config) { c.routeScope = on }
}

// WithBreaker sets how long the middleware stops asking a limiter that
// failed or timed out (default DefaultBreakFor; 0 turns the breaker off).
// Without it, every request during a Redis outage would wait out the whole
// timeout; with it, requests go straight to the fallback or the failure
// policy, and once the time is up one request tries the limiter again: on
// success all requests return to it, on failure the break starts over.
func WithBreaker(breakFor time.Duration) Option {
	return func(c *config) { c.breakFor = breakFor }
}

// WithUnavailableRetryAfter sets the Retry-After sent with the 503 of
// FailClosed, rounded up to whole seconds and at least 1; the default is
// one second.
func WithUnavailableRetryAfter(d time.Duration) Option {
	return func(c *config) { c.unavailableRetry = d }
}

// WithLogger sets the logger for limiter failures; the default is
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
// Structured Field string allows; New panics otherwise, since the name is
// fixed when the program is written.
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

// config is the middleware's state, fixed when New returns.
type config struct {
	limiter          algorithms.Limiter
	keyFunc          keyfunc.KeyFunc
	cost             func(*http.Request) int
	limiterFunc      func(*http.Request, string) algorithms.Limiter
	timeout          time.Duration
	policy           FailurePolicy
	fallback         algorithms.Limiter
	breakFor         time.Duration
	routeScope       bool
	unavailableRetry time.Duration
	logger           *slog.Logger
	legacy           bool
	ietf             bool
	resetMode        ResetMode
	policyName       string
	denied           func(http.ResponseWriter, *http.Request, algorithms.Result)
	keyError         func(http.ResponseWriter, *http.Request, error)
	now              func() time.Time

	// Precomputed at New, so the hot path only appends numbers.
	sfName           []byte // the policy name as an sf-string, quoted
	tooMany          problem
	unavailable      problem
	badKey           problem
	unauthorized     problem
	badCost          problem
	costTooLarge     problem
	logGate          logGate
	logSecret        [32]byte     // keys the key hashes in logs
	brokenUntil      atomic.Int64 // Unix nanoseconds until which the limiter is not asked; 0 when healthy
	mainPolicies     *policySet   // how New's limiter's limits appear in responses
	fallbackPolicies *policySet   // and the fallback's
	policyCache      sync.Map     // algorithms.Limiter -> *policySet, for WithLimiterFunc's limiters
	policyCached     atomic.Int64 // entries added to policyCache
}

// New returns middleware that rate-limits each request with limiter (or the
// one WithLimiterFunc picks) under the key the key function derives.
//
// New panics on configuration that no request could be served with, all of
// which is fixed when the program is written: a nil limiter, a timeout that
// is not positive, a negative breaker time, an invalid policy name, or an
// unknown FailurePolicy or ResetMode.
func New(limiter algorithms.Limiter, opts ...Option) func(http.Handler) http.Handler {
	c := &config{
		limiter:          limiter,
		timeout:          DefaultTimeout,
		breakFor:         DefaultBreakFor,
		routeScope:       true,
		unavailableRetry: time.Second,
		legacy:           true,
		ietf:             true,
		policyName:       DefaultPolicyName,
		now:              time.Now,
	}
	for _, o := range opts {
		o(c)
	}
	if err := c.init(); err != nil {
		panic("middleware: " + err.Error())
	}
	return func(next http.Handler) http.Handler {
		return &handler{c: c, next: next}
	}
}

// init checks the options, fills in defaults and precomputes responses.
func (c *config) init() error {
	switch {
	case c.limiter == nil:
		return errors.New("nil limiter")
	case c.timeout <= 0:
		return fmt.Errorf("timeout %s is not positive", c.timeout)
	case c.breakFor < 0:
		return fmt.Errorf("breaker time %s is negative", c.breakFor)
	case c.policy != FailOpen && c.policy != FailClosed:
		return fmt.Errorf("unknown failure policy %d", c.policy)
	case c.resetMode != ResetEpoch && c.resetMode != ResetDelta:
		return fmt.Errorf("unknown reset mode %d", c.resetMode)
	}
	name, err := sfString(c.policyName)
	if err != nil {
		return err
	}
	c.sfName = name
	if _, err := rand.Read(c.logSecret[:]); err != nil {
		return fmt.Errorf("no randomness for the log key: %w", err)
	}
	if c.keyFunc == nil {
		c.keyFunc = keyfunc.IP()
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.keyError == nil {
		c.keyError = c.writeKeyError
	}

	c.tooMany = newTooMany(c.policyName)
	c.mainPolicies = c.newPolicySet(c.limiter)
	if c.fallback != nil {
		c.fallbackPolicies = c.newPolicySet(c.fallback)
	}
	c.unavailable = newProblem(http.StatusServiceUnavailable, "",
		"The rate limiter is unavailable; retry after the number of seconds in Retry-After.", nil)
	c.unavailable.retryAfter = []string{strconv.FormatInt(ceilSeconds(c.unavailableRetry, 1), 10)}
	c.badKey = newProblem(http.StatusBadRequest, "",
		"The request could not be attributed to a client for rate limiting.", nil)
	c.unauthorized = newProblem(http.StatusUnauthorized, "",
		"The request lacks a valid credential to count it against a rate limit.", nil)
	c.badCost = newProblem(http.StatusBadRequest, "",
		"The request's cost against the rate limit is not valid.", nil)
	c.costTooLarge = newProblem(http.StatusRequestEntityTooLarge, "",
		"The request's cost exceeds the whole rate-limit quota, so it can never pass.", nil)
	return nil
}

// maxPolicyName bounds the policy name, which is copied into every response.
const maxPolicyName = 64

// sfString returns s as an RFC 9651 sf-string: quoted, with " and \
// escaped. It refuses what an sf-string cannot hold (anything outside
// printable ASCII) and names that are empty or too long.
func sfString(s string) ([]byte, error) {
	if s == "" || len(s) > maxPolicyName {
		return nil, fmt.Errorf("policy name must be 1 to %d characters, got %d", maxPolicyName, len(s))
	}
	b := make([]byte, 0, len(s)+4)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch < 0x20 || ch > 0x7e {
			return nil, fmt.Errorf("policy name %q has a character outside printable ASCII", s)
		}
		if ch == '"' || ch == '\\' {
			b = append(b, '\\')
		}
		b = append(b, ch)
	}
	return append(b, '"'), nil
}

// handler is the middleware around one next handler.
type handler struct {
	c    *config
	next http.Handler
}

// ServeHTTP decides on r and then serves or refuses it.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := h.c
	key, err := c.keyFunc(r)
	if err != nil {
		c.keyError(w, r, err)
		return
	}
	if key == "" {
		// Checked before the route scope would make it look like a key.
		c.badKey.write(w)
		return
	}
	cost := 1
	if c.cost != nil {
		cost = c.cost(r)
	}
	// ps describes the limits of whichever limiter decides, for the headers.
	lim, ps := c.limiter, c.mainPolicies
	if c.limiterFunc != nil {
		if l := c.limiterFunc(r, key); l != nil {
			lim, ps = l, c.policiesOf(l)
		}
	}
	if c.routeScope {
		key = scoped(r, key)
	}

	d, res, err := c.decideGuarded(r.Context(), lim, key, cost)
	if c.fallback != nil && c.limiterFailed(r.Context(), err) {
		c.logFailure(err, key, "fallback")
		ps = c.fallbackPolicies
		d, res, err = c.decide(r.Context(), c.fallback, key, cost)
	}
	if err != nil {
		switch p := c.refusal(err); {
		case p != nil:
			p.write(w)
		case errors.Is(r.Context().Err(), context.Canceled):
			// The client is gone: nobody reads an answer and the failure
			// is not the limiter's. (A parent deadline that passed is
			// answered by the policy below, like any other timeout.)
		case c.policy == FailClosed:
			c.logFailure(err, key, "closed")
			c.unavailable.write(w)
		default:
			c.logFailure(err, key, "open")
			h.next.ServeHTTP(w, r)
		}
		return
	}

	c.setHeaders(w.Header(), res, &d.vals, ps)
	if !res.Allowed {
		if c.denied != nil {
			c.denied(w, r, res)
			return
		}
		if ps != nil && res.Index < len(ps.tooMany) {
			ps.tooMany[res.Index].write(w)
		} else {
			c.tooMany.write(w)
		}
		return
	}
	h.next.ServeHTTP(w, r)
}

// decide asks l for a decision within the timeout.
func (c *config) decide(parent context.Context, l algorithms.Limiter, key string, cost int) (*decision, algorithms.Result, error) {
	d := newDecision(parent, c.timeout)
	res, err := l.Allow(d, key, cost)
	d.release()
	return d, res, err
}

// errBroken stands for the limiter's answer while the breaker is open.
var errBroken = errors.New("middleware: limiter skipped after a recent failure")

// decideGuarded is decide behind the breaker: while it is open the limiter
// is not asked and errBroken is the answer; a failure opens it.
func (c *config) decideGuarded(ctx context.Context, l algorithms.Limiter, key string, cost int) (*decision, algorithms.Result, error) {
	if c.breakFor == 0 {
		return c.decide(ctx, l, key, cost)
	}
	if until := c.brokenUntil.Load(); until != 0 {
		now := c.now().UnixNano()
		// When the break is over, one request (the one that wins the swap)
		// tries the limiter; the others stay on the broken path meanwhile.
		if now < until || !c.brokenUntil.CompareAndSwap(until, now+int64(c.breakFor)) {
			return nil, algorithms.Result{}, errBroken
		}
	}
	d, res, err := c.decide(ctx, l, key, cost)
	switch {
	case err == nil:
		if c.brokenUntil.Load() != 0 {
			c.brokenUntil.Store(0)
		}
	case c.limiterFailed(ctx, err):
		c.brokenUntil.Store(c.now().UnixNano() + int64(c.breakFor))
	}
	return d, res, err
}

// scoped prefixes key with the route pattern that matched r, if any. The
// pattern comes from the server's code, not the client, but is escaped all
// the same so that the first '|' always ends it, and hashed when long, so
// keys stay short.
func scoped(r *http.Request, key string) string {
	pattern := r.Pattern
	if rc := chi.RouteContext(r.Context()); rc != nil {
		// A group's middleware sees the mount pattern that matched, one of
		// "/a", "/a/" and "/a/*": chi trims the slash, and the wildcard is
		// trimmed here, so the whole group counts as one.
		if p := strings.TrimSuffix(rc.RoutePattern(), "/*"); p != "" {
			pattern = p
		}
	}
	switch {
	case pattern == "":
		return key
	case len(pattern) > maxScopeLen:
		sum := sha256.Sum256([]byte(pattern))
		pattern = "#" + hex.EncodeToString(sum[:16])
	case strings.ContainsAny(pattern, "%|"):
		pattern = scopeEscaper.Replace(pattern)
	}
	return "route:" + pattern + "|" + key
}

// maxScopeLen bounds the route pattern kept verbatim in a key.
const maxScopeLen = 128

var scopeEscaper = strings.NewReplacer("%", "%25", "|", "%7C")

// refusal returns the answer to a request that the limiter refused for its
// key or cost, which no other limiter would accept either, or nil when err
// is the limiter failing.
func (c *config) refusal(err error) *problem {
	switch {
	case errors.Is(err, algorithms.ErrCostExceedsLimit):
		return &c.costTooLarge
	case errors.Is(err, algorithms.ErrInvalidCost):
		return &c.badCost
	case errors.Is(err, algorithms.ErrInvalidKey):
		return &c.badKey
	}
	return nil
}

// limiterFailed reports whether err is the limiter failing, rather than
// refusing the key or cost or the request's own context ending.
func (c *config) limiterFailed(ctx context.Context, err error) bool {
	return err != nil && c.refusal(err) == nil && ctx.Err() == nil
}

// Canonical header names, as http.Header stores them, so the hot path can
// assign to the map directly.
const (
	hdrLimit        = "X-Ratelimit-Limit"
	hdrRemaining    = "X-Ratelimit-Remaining"
	hdrReset        = "X-Ratelimit-Reset"
	hdrPolicy       = "Ratelimit-Policy"
	hdrRateLimit    = "Ratelimit"
	hdrRetryAfter   = "Retry-After"
	hdrCacheControl = "Cache-Control"
	hdrContentType  = "Content-Type"
	hdrAuthenticate = "Www-Authenticate"
)

// setHeaders sets the rate-limit headers for res, and Retry-After when it
// is a denial. All values are cut from one string and the slices that hold
// them from vals, so the headers cost one allocation however many there are.
func (c *config) setHeaders(h http.Header, res algorithms.Result, vals *[6]string, ps *policySet) {
	var buf [320]byte // enough for every header with the longest policy name
	var ends [6]int
	var names [6]string
	n := 0
	b := buf[:0]
	end := func(name string) { names[n], ends[n], n = name, len(b), n+1 }

	limit := max(res.Limit, 0)
	remaining := max(res.Remaining, 0)
	// t is when the quota is whole again; on a denial, when this request
	// could pass, so that Retry-After, which must win, never points earlier.
	var retry int64
	reset := ceilSeconds(res.ResetAfter, 0)
	t := reset
	if !res.Allowed {
		retry = ceilSeconds(res.RetryAfter, 1)
		t = retry
	}

	if c.legacy {
		b = strconv.AppendInt(b, int64(limit), 10)
		end(hdrLimit)
		b = strconv.AppendInt(b, int64(remaining), 10)
		end(hdrRemaining)
		if c.resetMode == ResetEpoch {
			b = strconv.AppendInt(b, ceilUnix(c.now().Add(max(res.ResetAfter, 0))), 10)
		} else {
			b = strconv.AppendInt(b, reset, 10)
		}
		end(hdrReset)
	}
	if c.ietf {
		name := c.sfName
		if ps != nil && res.Index < len(ps.names) {
			// Every policy of the limiter, fixed when it was described; the
			// RateLimit item below names the one that binds.
			h[hdrPolicy] = ps.header
			name = ps.names[res.Index]
		} else {
			b = append(b, c.sfName...)
			b = append(b, ";q="...)
			b = strconv.AppendInt(b, int64(limit), 10)
			b = append(b, ";w="...)
			b = strconv.AppendInt(b, ceilSeconds(res.Period, 1), 10)
			end(hdrPolicy)
		}
		b = append(b, name...)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, int64(remaining), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, t, 10)
		end(hdrRateLimit)
	}
	if !res.Allowed {
		b = strconv.AppendInt(b, retry, 10)
		end(hdrRetryAfter)
		h[hdrCacheControl] = noStore
	}

	s := string(b)
	start := 0
	for i := range n {
		vals[i] = s[start:ends[i]]
		start = ends[i]
		// Three-index slices: a later Add must copy, not write into the next.
		h[names[i]] = vals[i : i+1 : i+1]
	}
}

// policySet is how the limits of one limiter appear in responses: every
// policy in RateLimit-Policy, each under its own name, and a 429 body that
// names the violated one.
type policySet struct {
	header  []string  // the RateLimit-Policy value, ready to assign
	names   [][]byte  // policy i's name as an sf-string
	tooMany []problem // the 429 for a denial bound by policy i
}

// newPolicySet describes l's limits, or returns nil when l does not
// describe them (a limiter not made by algorithms.New): the headers then
// carry the binding limit alone, under the policy name. One limit keeps the
// policy name; several are named after it with their window in seconds,
// such as "search-1s" and "search-3600s".
func (c *config) newPolicySet(l algorithms.Limiter) *policySet {
	d, ok := l.(algorithms.Describer)
	if !ok {
		return nil
	}
	policies := d.Policies()
	if len(policies) == 0 {
		return nil
	}
	ps := &policySet{}
	var header []byte
	seen := map[string]bool{}
	for i, p := range policies {
		w := ceilSeconds(p.Window, 1)
		name := c.policyName
		if len(policies) > 1 {
			name = c.policyName + "-" + strconv.FormatInt(w, 10) + "s"
			if seen[name] {
				name += "-" + strconv.Itoa(i+1)
			}
		}
		seen[name] = true
		sf, err := sfString(name)
		if err != nil {
			// The suffix made the name too long: announce the binding
			// limit alone, under the policy name.
			return nil
		}
		if i > 0 {
			header = append(header, ", "...)
		}
		header = append(header, sf...)
		header = append(header, ";q="...)
		header = strconv.AppendInt(header, int64(p.Quota), 10)
		header = append(header, ";w="...)
		header = strconv.AppendInt(header, w, 10)
		ps.names = append(ps.names, sf)
		ps.tooMany = append(ps.tooMany, newTooMany(name))
	}
	ps.header = []string{string(header)}
	return ps
}

// policiesOf returns the policy set of a limiter WithLimiterFunc picked,
// describing each limiter once. Only limiters held by pointer are cached
// (others may not even be usable as map keys), and at most
// maxCachedPolicySets of them, in case a limiter is made per request.
func (c *config) policiesOf(l algorithms.Limiter) *policySet {
	if reflect.TypeOf(l).Kind() != reflect.Pointer {
		return c.newPolicySet(l)
	}
	if ps, ok := c.policyCache.Load(l); ok {
		return ps.(*policySet)
	}
	ps := c.newPolicySet(l)
	if c.policyCached.Add(1) <= maxCachedPolicySets {
		c.policyCache.Store(l, ps)
	}
	return ps
}

// maxCachedPolicySets bounds policiesOf's cache.
const maxCachedPolicySets = 1024

// newTooMany is the 429 problem for a denial by the named policy.
func newTooMany(policy string) problem {
	return newProblem(http.StatusTooManyRequests, quotaExceededType,
		"The rate limit for this client is exhausted; retry after the number of seconds in Retry-After.",
		[]string{policy})
}

// ceilSeconds returns d in whole seconds, rounded up, and at least least.
func ceilSeconds(d time.Duration, least int64) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return max(s, least)
}

// ceilUnix returns t as a Unix time in seconds, rounded up.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// writeKeyError is the default key error handler: 401 when the request
// lacks a usable credential (keyfunc's token and API key errors), with a
// challenge for each kind of credential that was looked for, and 400 for
// anything else. The error itself stays out of the response: it may quote
// what the client sent.
func (c *config) writeKeyError(w http.ResponseWriter, _ *http.Request, err error) {
	var challenges []string
	switch {
	case errors.Is(err, keyfunc.ErrInvalidToken):
		challenges = challengeInvalidToken
	case errors.Is(err, keyfunc.ErrNoToken):
		challenges = challengeBearer
	}
	if errors.Is(err, keyfunc.ErrNoAPIKey) || errors.Is(err, keyfunc.ErrInvalidAPIKey) {
		if challenges == nil {
			challenges = challengeAPIKey
		} else {
			challenges = append(challenges[:1:1], challengeAPIKey...)
		}
	}
	if challenges != nil {
		w.Header()[hdrAuthenticate] = challenges
		c.unauthorized.write(w)
		return
	}
	if errors.Is(err, keyfunc.ErrInvalidOption) {
		// The key function itself is misconfigured: the operator must hear
		// of it, though the client still gets a 4xx.
		c.logFailure(err, "", "key function misconfigured")
	}
	c.badKey.write(w)
}

// WWW-Authenticate challenges for a 401, which RFC 9110 requires one of:
// Bearer is RFC 6750's; API keys have no registered scheme, so the challenge
// just names the kind of credential.
var (
	challengeBearer       = []string{`Bearer`}
	challengeInvalidToken = []string{`Bearer error="invalid_token"`}
	challengeAPIKey       = []string{`APIKey`}
)

// The problem type of RFC 9457 for an exhausted quota, registered by IANA.
const quotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// Shared header values. They are only ever assigned whole to a header map,
// with no spare capacity, so nothing writes into them.
var (
	noStore            = []string{"no-store"}
	problemContentType = []string{"application/problem+json"}
)

// problem is a precomputed RFC 9457 response.
type problem struct {
	status     int
	body       []byte
	retryAfter []string // set for 503
}

// problemBody is the JSON of a problem, in the order RFC 9457 lists members.
type problemBody struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
}

// newProblem builds the response for status. An empty typ is about:blank,
// whose title is the status's reason phrase.
func newProblem(status int, typ, detail string, policies []string) problem {
	if typ == "" {
		typ = "about:blank"
	}
	body, err := json.Marshal(problemBody{
		Type:             typ,
		Title:            http.StatusText(status),
		Status:           status,
		Detail:           detail,
		ViolatedPolicies: policies,
	})
	if err != nil {
		panic("middleware: " + err.Error()) // strings and ints always marshal
	}
	return problem{status: status, body: body}
}

// write sends the problem. Rate-limit headers already set stay.
func (p *problem) write(w http.ResponseWriter) {
	// No Content-Length: net/http adds it for a body this small, and a
	// ninth header would make the map of a 429 grow past one group.
	h := w.Header()
	h[hdrContentType] = problemContentType
	h[hdrCacheControl] = noStore
	if p.retryAfter != nil {
		h[hdrRetryAfter] = p.retryAfter
	}
	w.WriteHeader(p.status)
	_, _ = w.Write(p.body) // a client that hung up is no error of ours
}

// logGate lets at most one failure a second through to the log, so that a
// store outage under load cannot flood it.
type logGate struct {
	last       atomic.Int64 // Unix nanoseconds of the last record written
	suppressed atomic.Int64 // failures not logged since then
}

// logFailure logs a limiter failure with a hash of the key, never the key:
// keys hold client addresses and credentials' digests.
func (c *config) logFailure(err error, key, policy string) {
	now := c.now().UnixNano()
	last := c.logGate.last.Load()
	if last != 0 && now-last < int64(time.Second) || !c.logGate.last.CompareAndSwap(last, now) {
		c.logGate.suppressed.Add(1)
		return
	}
	attrs := make([]slog.Attr, 0, 4)
	attrs = append(attrs, slog.String("failure_policy", policy))
	if key != "" {
		// Keyed with a secret of this process: log lines about one client
		// can be matched, but an IP cannot be recovered by hashing all 2^32.
		mac := hmac.New(sha256.New, c.logSecret[:])
		mac.Write([]byte(key))
		attrs = append(attrs, slog.String("key_hash", hex.EncodeToString(mac.Sum(nil)[:6])))
	}
	attrs = append(attrs,
		slog.Int64("suppressed", c.logGate.suppressed.Swap(0)),
		slog.Any("error", err))
	c.logger.LogAttrs(context.Background(), slog.LevelError, "rate limiter failed", attrs...)
}
