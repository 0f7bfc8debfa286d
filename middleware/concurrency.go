package middleware

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// DefaultConcurrencyPolicyName names a concurrency limit's policy unless
// WithPolicyName says otherwise, so that it does not share a name with a
// rate limit's policy on the same route.
const DefaultConcurrencyPolicyName = "concurrency"

// NewConcurrency returns middleware that lets at most the limiter's limit
// of requests per key be in flight at once (algorithms.NewConcurrency): it
// takes a lease before the handler runs and releases it when the handler
// returns, also when the handler panics (the panic then goes on) and when
// the client has gone away (the release does not depend on the request's
// context). A request over the limit gets 429 with a problem+json body,
// Retry-After (the limiter's estimate of when a slot frees, in seconds
// rounded up, at least 1) and the IETF fields
//
//	RateLimit-Policy: "concurrency";q=10;qu="concurrent-requests"
//	RateLimit: "concurrency";r=0;t=1
//
// which every admitted request carries too (without t). The fields are
// added to any a rate limit set before, so mount a rate limit outside
// (before) this middleware: its requests over the rate then take no slot.
// The X-RateLimit-* headers describe a rate and are not sent.
//
// It takes the options of New that apply: WithKeyFunc, WithRouteScope,
// WithTimeout (for Acquire and for Release), WithErrorPolicy (for a
// limiter's error), WithPolicyName (default DefaultConcurrencyPolicyName),
// WithIETFHeaders, WithDeniedHandler, WithKeyErrorHandler,
// WithUnavailableRetryAfter, WithLogger, WithObserver, WithShadow and
// WithClock. WithCost, WithLimiterFunc, WithFallback and a key error
// counted under a rate limit (WithCountCredentialFailures is ignored: a
// key error is answered at once) do not apply; the first three are
// refused. Misconfiguration is refused as New refuses it, with an error
// wrapping algorithms.ErrInvalidOption.
//
// Releasing a lease held in Redis costs a round trip after the handler
// returns, before the response is finished, so a client that waits for
// each response never meets its own previous request's lease.
func NewConcurrency(limiter algorithms.ConcurrencyLimiter, opts ...Option) (func(http.Handler) http.Handler, error) {
	c := newConfig()
	c.policyName = DefaultConcurrencyPolicyName
	if err := c.apply(opts); err != nil {
		return nil, err
	}
	if err := c.initConcurrency(limiter); err != nil {
		return nil, fmt.Errorf("%w: %w", algorithms.ErrInvalidOption, err)
	}
	store := storeName(limiter)
	return func(next http.Handler) http.Handler {
		mustHandle(next)
		return &concurrencyHandler{c: c, limiter: limiter, store: store, next: next}
	}, nil
}

// initConcurrency checks the options for a concurrency limit.
func (c *config) initConcurrency(limiter algorithms.ConcurrencyLimiter) error {
	switch {
	case isNil(limiter):
		return errors.New("nil concurrency limiter")
	case c.cost != nil:
		return errors.New("WithCost does not apply to a concurrency limit")
	case c.limiterFunc != nil:
		return errors.New("WithLimiterFunc does not apply to a concurrency limit")
	case c.fallback != nil:
		return errors.New("WithFallback does not apply to a concurrency limit: its store decides when Redis cannot")
	case c.delay != 0:
		return errors.New("WithDelay does not apply to a concurrency limit: a request over it is refused, not held")
	case c.chargeIfSet:
		return errors.New("WithChargeIf does not apply to a concurrency limit: a lease is returned whatever the outcome")
	case c.costAfter:
		return errors.New("WithCostAfter does not apply to a concurrency limit: it has no cost")
	}
	if err := c.prepare(); err != nil {
		return err
	}
	// A key error is answered at once: there is no rate limit to count it
	// under.
	c.countCredentialFailures = false
	c.leases = true
	c.tooMany = newProblem(http.StatusTooManyRequests, quotaExceededType,
		"Too many requests from this client are in progress; retry after the number of seconds in Retry-After.",
		[]string{c.policyName})
	return nil
}

// concurrencyHandler is the concurrency middleware around one handler.
type concurrencyHandler struct {
	c       *config
	limiter algorithms.ConcurrencyLimiter
	store   string // Decision.Store for limiter
	next    http.Handler
}

// ServeHTTP runs r through the steps New's middleware takes (skip.go,
// identity.go, answer.go), but for decide, which here takes a lease,
// released when the handler returns.
func (h *concurrencyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := h.c
	if c.skipped(r) {
		h.next.ServeHTTP(w, r)
		return
	}
	key, act := c.identify(w, r)
	if act == proceed {
		v, lease := h.acquire(r, key)
		if lease != nil {
			// Released however the handler ends: returning, panicking, or
			// the client going away.
			defer h.release(r, lease, v.key)
		}
		act = c.answer(w, r, &v)
	}
	if act != answered {
		h.next.ServeHTTP(w, r)
	}
}

// acquire is the decide step of a concurrency limit: it asks for a lease
// for r under key scoped to its route, and returns the lease unless the
// limiter failed.
func (h *concurrencyHandler) acquire(r *http.Request, key string) (verdict, *algorithms.Lease) {
	c := h.c
	v := verdict{key: key}
	if c.routeScope {
		v.key = c.scoped(r, key)
	}
	start := time.Now() // the deadline's and the observer's
	d := newDecisionAt(r.Context(), start, c.timeout)
	lease, err := h.limiter.Acquire(d, v.key)
	d.release()
	v.d = d // its header storage holds a denial's problem values
	if c.observer != nil {
		v.store, v.took = h.store, time.Since(start)
	}
	if err != nil {
		v.err = err
		return v, nil
	}
	v.res = algorithms.Result{Allowed: lease.Allowed, Limit: lease.Limit, Remaining: lease.Remaining,
		RetryAfter: lease.RetryAfter, Decider: lease.Decider}
	return v, lease
}

// release gives the lease back within the timeout, on a context the
// client's departure does not cancel, and logs a failure: the lease then
// expires on its own.
func (h *concurrencyHandler) release(r *http.Request, lease *algorithms.Lease, key string) {
	if !lease.Allowed {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.c.timeout)
	defer cancel()
	if err := lease.Release(ctx); err != nil {
		h.c.logFailure(err, key, "release")
	}
}

// setLeaseHeaders adds the IETF fields for a lease's result (to any a rate
// limit set), and Retry-After when it was denied.
func (c *config) setLeaseHeaders(hd http.Header, lease algorithms.Result) {
	var retry int64
	if !lease.Allowed {
		retry = ceilSeconds(lease.RetryAfter, 1)
		hd[hdrRetryAfter] = []string{strconv.FormatInt(retry, 10)}
	}
	if !c.ietf {
		return
	}
	b := make([]byte, 0, 2*len(c.sfName)+48)
	b = append(b, c.sfName...)
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, int64(max(lease.Limit, 0)), 10)
	b = append(b, `;qu="concurrent-requests"`...)
	hd.Add(hdrPolicy, string(b))
	b = append(b[:0], c.sfName...)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, int64(max(lease.Remaining, 0)), 10)
	if !lease.Allowed {
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, retry, 10)
	}
	hd.Add(hdrRateLimit, string(b))
}
