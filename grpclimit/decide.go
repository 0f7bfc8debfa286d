package grpclimit

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/middleware"
)

// admit decides a call to fullMethod as it starts (req is a unary call's
// request, nil for a stream), and returns its answer and what it was
// counted under (empty when it was not).
func (c *config) admit(ctx context.Context, fullMethod string, req any) (answer, counted) {
	p := c.policyFor(fullMethod)
	if c.skip != nil && c.skip(ctx, fullMethod) {
		c.observe(p, middleware.OutcomeSkipped, "", 0)
		return answer{}, counted{}
	}
	identity, a, ok := c.identify(ctx, fullMethod, p)
	if !ok {
		return a, counted{}
	}
	cost := 1
	if c.cost != nil {
		cost = c.cost(ctx, fullMethod, req)
	}
	key := identity
	if c.scope {
		key = middleware.ScopedKey(fullMethod, identity)
	}
	return c.judge(ctx, p, key, identity, cost), counted{key: key, identity: identity}
}

// counted is what a call was counted under: its key, scoped to the
// method, and the key function's identity.
type counted struct {
	key, identity string
}

// identify runs the key function on the call. It reports false, with the
// answer, when the call has no usable identity; in shadow mode such a call
// goes on, with an empty answer.
func (c *config) identify(ctx context.Context, fullMethod string, p *policy) (string, answer, bool) {
	r := CallRequest(ctx, fullMethod)
	var (
		identity string
		err      error
	)
	if forwardedTooLong(r) {
		err = errForwardedTooLong
	} else {
		identity, err = c.keyFunc(r)
	}
	switch {
	case err != nil:
		c.observe(p, middleware.OutcomeKeyError, "", 0)
		if c.shadow {
			return "", answer{}, false
		}
		return "", keyError(err), false
	case identity == "":
		c.observe(p, middleware.OutcomeInvalid, "", 0)
		if c.shadow {
			return "", answer{}, false
		}
		return "", invalid(algorithms.ErrInvalidKey), false
	}
	return identity, answer{}, true
}

// judge asks p's limiter about cost units for key and turns its answer
// into the call's. identity is the key before the method scope, for
// QuotaFailure's subject.
func (c *config) judge(ctx context.Context, p *policy, key, identity string, cost int) answer {
	start := time.Now()
	res, err := c.ask(ctx, p.limiter, key, cost)
	took := time.Since(start)
	if err != nil {
		return c.failed(ctx, p, key, identity, err, took)
	}
	switch res.Decider {
	case algorithms.DecidedFailOpen:
		c.observe(p, middleware.OutcomeFailOpen, p.store, took)
		return answer{}
	case algorithms.DecidedFailClosed:
		c.observe(p, middleware.OutcomeFailClosed, p.store, took)
		if c.shadow {
			return answer{}
		}
		return c.unavailable()
	}
	local := res.Decider == algorithms.DecidedLocally
	switch {
	case res.Allowed:
		c.observe(p, pick(local, middleware.OutcomeLocalAllowed, middleware.OutcomeAllowed), p.store, took)
		if c.shadow {
			return answer{}
		}
		return answer{header: c.fields(res, p)}
	case c.shadow:
		c.observe(p, middleware.OutcomeShadowDenied, p.store, took)
		c.logEvent(slog.LevelInfo, "rate limit would refuse a call (shadow mode)", key, slog.String("policy", p.name))
		return answer{}
	}
	outcome := middleware.OutcomeDenied
	if local {
		outcome = middleware.OutcomeLocalDenied
	} else if res.Decider == algorithms.DecidedByCache {
		outcome = middleware.OutcomeCacheDenied
	}
	c.observe(p, outcome, p.store, took)
	return c.denied(res, p, identity)
}

// failed answers a call whose limiter returned an error: a refused key or
// cost, the caller gone, or a failure, which the failure policy decides.
func (c *config) failed(ctx context.Context, p *policy, key, identity string, err error, took time.Duration) answer {
	var a answer
	switch {
	case errors.Is(err, algorithms.ErrCostExceedsLimit):
		c.observe(p, middleware.OutcomeInvalid, p.store, took)
		a = tooCostly(p, identity)
	case errors.Is(err, algorithms.ErrInvalidKey), errors.Is(err, algorithms.ErrInvalidCost):
		c.observe(p, middleware.OutcomeInvalid, p.store, took)
		a = invalid(err)
	case ctx.Err() != nil:
		// The caller went away or its deadline passed: nobody to limit.
		return answer{err: status.FromContextError(ctx.Err()).Err()}
	default:
		c.logEvent(slog.LevelError, "rate limiter failed", key,
			slog.String("policy", p.name), slog.String("failure_policy", c.failure.String()), slog.Any("error", err))
		if c.failure == middleware.PassOnError {
			c.observe(p, middleware.OutcomeFailOpen, p.store, took)
			return answer{}
		}
		c.observe(p, middleware.OutcomeFailClosed, p.store, took)
		a = c.unavailable()
	}
	if c.shadow {
		return answer{}
	}
	return a
}

// ask asks l within the decision's timeout. A limiter that bounds its
// decisions itself (a Redis store's, by its WithTimeout) gets the call's
// context as it is unless WithTimeout set a shorter bound.
func (c *config) ask(ctx context.Context, l algorithms.Limiter, key string, cost int) (algorithms.Result, error) {
	if b, ok := l.(algorithms.DecisionBounder); ok && (!c.timeoutSet || c.timeout >= b.DecisionTimeout()) {
		return l.Allow(ctx, key, cost)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return l.Allow(ctx, key, cost)
}

// observe tells the observer, if any, of a call's outcome.
func (c *config) observe(p *policy, outcome, store string, took time.Duration) {
	if c.observer == nil {
		return
	}
	c.observer.Decision(middleware.Decision{Policy: p.name, Outcome: outcome, Store: store, Duration: took})
}

// pick returns a when cond holds, else b.
func pick(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}
