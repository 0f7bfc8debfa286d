package middleware

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// Outcomes of a request, as an Observer hears of them.
const (
	// OutcomeAllowed: Redis (or the memory store) admitted the request.
	OutcomeAllowed = "allowed"
	// OutcomeDenied: Redis (or the memory store) denied it: 429.
	OutcomeDenied = "denied"
	// OutcomeShadowDenied: it would have been denied, and passed because
	// of WithShadow.
	OutcomeShadowDenied = "shadow_denied"
	// OutcomeFailOpen: nothing could decide, and it passed uncounted (the
	// store's redisstore.FailOpen, or the middleware's PassOnError for a
	// limiter's error).
	OutcomeFailOpen = "fail_open"
	// OutcomeFailClosed: nothing could decide, and it got 503.
	OutcomeFailClosed = "fail_closed"
	// OutcomeLocalAllowed and OutcomeLocalDenied: a Redis store's local
	// twin decided, Redis being unable to in time.
	OutcomeLocalAllowed = "local_allowed"
	OutcomeLocalDenied  = "local_denied"
	// OutcomeCacheDenied: a Redis store repeated Redis's earlier denial
	// from memory.
	OutcomeCacheDenied = "cache_denied"
	// OutcomeKeyError: the key function failed (401 or 400, or 429 once the
	// client's quota of failed credentials is spent).
	OutcomeKeyError = "key_error"
	// OutcomeInvalid: the key or cost was refused (400, 413).
	OutcomeInvalid = "invalid"
	// OutcomeSkipped: WithSkip exempted the request; nothing was decided
	// or counted.
	OutcomeSkipped = "skipped"
)

// Observer receives what the middleware does, for metrics. Its methods are
// called on the request's path and must be fast and safe for concurrent
// use. Package metrics implements it with Prometheus.
type Observer interface {
	// Decision reports one request's outcome.
	Decision(Decision)
	// BreakerChanged reports the middleware's breaker opening (open true)
	// or closing, for the named policy.
	BreakerChanged(policy string, open bool)
}

// Decision is one request as an Observer hears of it.
type Decision struct {
	// Policy is the middleware's policy name (WithPolicyName).
	Policy string
	// Outcome is one of the Outcome constants.
	Outcome string
	// Store is "memory" or "redis" for limiters made by algorithms.New,
	// "custom" for others, "" when no limiter was asked (a key error, or
	// the breaker open: see WithBreakFor).
	Store string
	// Duration is how long the limiter took to decide, 0 when no limiter
	// was asked.
	Duration time.Duration
}

// WithObserver sets an Observer of every request's outcome and of the
// breaker; nil (the default) observes nothing. A nil pointer in an Observer
// is refused by New.
func WithObserver(o Observer) Option {
	return func(c *config) { c.observer = o }
}

// WithShadow turns shadow mode on: every request is decided and counted as
// usual, but none is refused: a request the limit would have denied passes,
// is reported as OutcomeShadowDenied and logged (at most once a second).
// Nothing else refuses either: key errors, invalid costs and failures pass
// on, reported as usual. No rate-limit headers are sent, since the limit
// is not in force and clients should not act on it. Use it to roll a new
// limit out: watch what it would deny, then turn it off.
func WithShadow(on bool) Option {
	return func(c *config) { c.shadow = on }
}

// WithClock sets the clock the middleware reads (X-RateLimit-Reset, the
// breaker, the log gate); the default is time.Now. With a memory store on
// the same clock (memstore.WithClock), tests of handlers run in test time;
// see storetest.ManualClock. A nil clock is refused by New.
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.now = now }
}

// storeName is Decision.Store for l, a Limiter or a ConcurrencyLimiter.
func storeName(l any) string {
	if n, ok := l.(algorithms.StoreNamer); ok {
		return n.StoreName()
	}
	return "custom"
}

// outcomeOf is the outcome of a decision the limiter made.
func outcomeOf(res algorithms.Result) string {
	switch res.Decider {
	case algorithms.DecidedFailOpen:
		return OutcomeFailOpen
	case algorithms.DecidedFailClosed:
		return OutcomeFailClosed
	case algorithms.DecidedByCache:
		return OutcomeCacheDenied
	case algorithms.DecidedLocally:
		if res.Allowed {
			return OutcomeLocalAllowed
		}
		return OutcomeLocalDenied
	}
	if res.Allowed {
		return OutcomeAllowed
	}
	return OutcomeDenied
}

// asked returns, for the observer, the store of l, the limiter that
// decided, and how long since t.start it took: "" and 0 when the breaker
// answered for it (see Decision), which reports no store and adds no
// sample of its duration, or when nobody observes. On the default clock,
// the end is the reading the breaker and the headers share.
func (c *config) asked(l algorithms.Limiter, t *readings, err error) (string, time.Duration) {
	if c.observer == nil || errors.Is(err, errBroken) {
		return "", 0
	}
	if c.realClock {
		return storeName(l), c.afterTime(t).Sub(monoBase) - t.start
	}
	return storeName(l), monotonic() - t.start
}

// observe reports a decision by store ("" when none was asked), if anyone
// listens.
func (c *config) observe(outcome, store string, took time.Duration) {
	if c.observer == nil {
		return
	}
	c.observer.Decision(Decision{Policy: c.policyName, Outcome: outcome, Store: store, Duration: took})
}

// shadowDenied lets through a request the limit denied, and logs it at
// most once a second.
func (c *config) shadowDenied(r *http.Request, key string) {
	if !c.shadowLog.allow(c.now().UnixNano()) {
		return
	}
	c.logger.LogAttrs(context.Background(), slog.LevelInfo, "rate limiter (shadow): would have denied",
		slog.String("policy", c.policyName), slog.String("route", r.Pattern),
		slog.String("key_hash", c.keyHash(key)), slog.Int64("suppressed", c.shadowLog.suppressed.Swap(0)))
}
