package middleware

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/breaker"
	"github.com/redlimit/redlimit/keyfunc"
)

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

	countCredentialFailures bool
	credentialKey           keyfunc.KeyFunc
	observer                Observer
	shadow                  bool
	shadowLog               logGate
	skip                    func(*http.Request) bool
	skipNil                 bool          // WithSkip(nil) was given
	timeoutSet              bool          // WithTimeout was given
	delay                   time.Duration // WithDelay's, 0 without
	delaySet                bool          // WithDelay was given
	maxWaiting              int
	waiting                 atomic.Int64 // requests waiting out a delay
	chargeIf                func(status int) bool
	chargeIfSet             bool // WithChargeIf was given
	costAfter               bool // WithCostAfter was given

	// Precomputed at New, so the hot path only appends numbers.
	sfName           []byte // the policy name as an sf-string, quoted
	tooMany          problem
	unavailable      problem
	badKey           problem
	unauthorized     problem
	badCost          problem
	costTooLarge     problem
	logGate          logGate
	logSecret        [32]byte         // keys the key hashes in logs
	breaker          *breaker.Breaker // nil when WithBreaker(0)
	mainPolicies     *policySet       // how New's limiter's limits appear in responses
	fallbackPolicies *policySet       // and the fallback's
	policyCache      sync.Map         // algorithms.Limiter -> *policySet, for WithLimiterFunc's limiters
	policyCached     atomic.Int64     // entries added to policyCache
}

// ErrInvalidOption is wrapped by NewChecked's error for configuration that
// no request could be served with.
var ErrInvalidOption = errors.New("middleware: invalid option")

// New returns middleware that rate-limits each request with limiter (or the
// one WithLimiterFunc picks) under the key the key function derives.
//
// New never panics. Configuration that no request could be served with (a
// nil limiter, a nil option, a timeout that is not positive, a negative
// breaker time, an invalid policy name, an unknown FailurePolicy or
// ResetMode, WithSkip(nil), a nil clock, a nil pointer as the Observer) is
// logged at once, at error level, and every request then gets 500 with a
// problem body that names nothing internal: the service fails closed
// rather than unlimited. So does the middleware wrapped around a nil
// handler. NewChecked reports it as an error instead, for programs that
// check their configuration at start-up.
func New(limiter algorithms.Limiter, opts ...Option) func(http.Handler) http.Handler {
	mw, err := NewChecked(limiter, opts...)
	if err == nil {
		return mw
	}
	return misconfigured(err, opts)
}

// NewChecked is New with the configuration checked up front: it returns an
// error wrapping ErrInvalidOption instead of middleware that answers 500.
func NewChecked(limiter algorithms.Limiter, opts ...Option) (func(http.Handler) http.Handler, error) {
	c := newConfig()
	c.limiter = limiter
	if err := c.apply(opts); err != nil {
		return nil, err
	}
	if err := c.init(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	return func(next http.Handler) http.Handler {
		if next == nil || isNil(next) && reflect.TypeOf(next).Kind() == reflect.Func {
			// Nothing to pass a request on to: fail closed, and say so.
			c.logger.LogAttrs(context.Background(), slog.LevelError,
				"redlimit: middleware wrapped around a nil handler: every request gets 500")
			return misconfiguredHandler
		}
		return &handler{c: c, next: next}
	}, nil
}

// init checks the options, fills in defaults and precomputes responses.
func (c *config) init() error {
	switch {
	case isNil(c.limiter):
		return errors.New("nil limiter")
	case c.fallback != nil && isNil(c.fallback):
		return errors.New("nil fallback limiter")
	}
	if err := c.prepare(); err != nil {
		return err
	}
	if err := c.checkDelay(); err != nil {
		return err
	}
	if err := c.checkSettle(); err != nil {
		return err
	}
	c.mainPolicies = c.newPolicySet(c.limiter)
	if c.fallback != nil {
		c.fallbackPolicies = c.newPolicySet(c.fallback)
	}
	return nil
}

// prepare checks the options every middleware uses, fills in their
// defaults and precomputes responses.
func (c *config) prepare() error {
	switch {
	case c.timeout <= 0:
		return fmt.Errorf("timeout %s is not positive", c.timeout)
	case c.breakFor < 0:
		return fmt.Errorf("breaker time %s is negative", c.breakFor)
	case c.policy != FailOpen && c.policy != FailClosed:
		return fmt.Errorf("unknown failure policy %d", c.policy)
	case c.resetMode != ResetEpoch && c.resetMode != ResetDelta:
		return fmt.Errorf("unknown reset mode %d", c.resetMode)
	case c.skipNil:
		return errors.New("WithSkip: nil function")
	case c.now == nil:
		return errors.New("nil clock")
	case c.observer != nil && isNil(c.observer):
		return fmt.Errorf("nil %T observer", c.observer)
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
	if c.credentialKey == nil {
		c.credentialKey = keyfunc.IP()
	}
	if c.breakFor > 0 {
		c.breaker = breaker.New(breaker.Config{OpenFor: c.breakFor}, c.logBreaker)
	}

	c.tooMany = newTooMany(c.policyName)
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
	if c.skip != nil && c.skip(r) {
		// Exempt by the server's own rule: not decided, not counted, no
		// headers.
		c.observe(OutcomeSkipped, nil, 0)
		h.next.ServeHTTP(w, r)
		return
	}
	key, err := c.keyFunc(r)
	if err != nil {
		if c.shadow {
			c.observe(OutcomeKeyError, nil, 0)
			h.next.ServeHTTP(w, r)
			return
		}
		c.credentialFailed(w, r, err)
		return
	}
	if key == "" {
		// Checked before the route scope would make it look like a key.
		c.refuse(w, r, h.next, &c.badKey, nil, 0)
		return
	}
	cost := 1
	if c.cost != nil {
		cost = c.cost(r)
	}
	// ps describes the limits of whichever limiter decides, for the headers.
	lim, ps := c.limiter, c.mainPolicies
	if c.limiterFunc != nil {
		if l := c.limiterFunc(r, key); !isNil(l) {
			lim, ps = l, c.policiesOf(l)
		}
	}
	if c.routeScope {
		key = scoped(r, key)
	}

	var start time.Time
	if c.observer != nil {
		start = time.Now()
	}
	d, res, err := c.decideGuarded(r.Context(), lim, key, cost, c.delayFor(lim))
	guarded := true // lim is behind the breaker
	if c.fallback != nil && c.limiterFailed(r.Context(), err) {
		c.logFailure(err, key, "fallback")
		lim, ps = c.fallback, c.fallbackPolicies
		d, res, err = c.decide(r.Context(), c.fallback, key, cost, c.delayFor(c.fallback))
		guarded = false
	}
	lim, took := c.asked(lim, start, err)
	if err != nil {
		switch p := c.refusal(err); {
		case p != nil:
			c.refuse(w, r, h.next, p, lim, took)
		case errors.Is(r.Context().Err(), context.Canceled):
			// The client is gone: nobody reads an answer and the failure
			// is not the limiter's. (A parent deadline that passed is
			// answered by the policy below, like any other timeout.)
		case c.policy == FailClosed:
			c.logFailure(err, key, "closed")
			c.observe(OutcomeFailClosed, lim, took)
			if c.shadow {
				h.next.ServeHTTP(w, r)
				return
			}
			c.unavailable.write(w)
		default:
			c.logFailure(err, key, "open")
			c.observe(OutcomeFailOpen, lim, took)
			h.next.ServeHTTP(w, r)
		}
		return
	}

	outcome := outcomeOf(res)
	switch {
	case c.shadow:
		// Nothing is refused and no header is sent: the limit is not in
		// force.
		if !res.Allowed && res.Decider != algorithms.DecidedFailClosed {
			outcome = OutcomeShadowDenied
			c.shadowDenied(r, key)
		}
		c.observe(outcome, lim, took)
		if res.Allowed && c.settles() {
			// Counted as when enforced, so the shadow counts tell the truth.
			h.serveSettled(w, r, settlement{lim, key, cost, res, guarded})
			return
		}
		h.next.ServeHTTP(w, r)
		return
	case res.Decider == algorithms.DecidedFailOpen:
		// Uncounted by the store's explicit choice: no headers, which would
		// describe a count that was not made.
		c.observe(outcome, lim, took)
		h.next.ServeHTTP(w, r)
		return
	case res.Decider == algorithms.DecidedFailClosed:
		c.observe(outcome, lim, took)
		c.unavailable.write(w)
		return
	}
	c.observe(outcome, lim, took)
	c.setHeaders(w.Header(), res, d, ps)
	if !res.Allowed {
		c.writeDenied(w, r, res, ps)
		return
	}
	// Only a reservation has a Delay, and only this path one: a store's
	// fail-open, fail-closed and local decisions never delay, nor shadow
	// mode, nor an error.
	if res.Delay > 0 && !c.wait(w, r, res.Delay) {
		return
	}
	if c.settles() {
		h.serveSettled(w, r, settlement{lim, key, cost, res, guarded})
		return
	}
	h.next.ServeHTTP(w, r)
}

// refuse answers a request whose key or cost the limiter refused with p,
// or passes it on in shadow mode.
func (c *config) refuse(w http.ResponseWriter, r *http.Request, next http.Handler, p *problem, l algorithms.Limiter, took time.Duration) {
	c.observe(OutcomeInvalid, l, took)
	if c.shadow {
		next.ServeHTTP(w, r)
		return
	}
	p.write(w)
}

// writeDenied answers a denial: the denied handler's response, or the 429
// naming the policy that bound. Headers are set already.
func (c *config) writeDenied(w http.ResponseWriter, r *http.Request, res algorithms.Result, ps *policySet) {
	switch {
	case c.denied != nil:
		c.denied(w, r, res)
	case ps != nil && res.Index >= 0 && res.Index < len(ps.tooMany):
		ps.tooMany[res.Index].write(w)
	default:
		c.tooMany.write(w)
	}
}

// decide asks l for a decision within the timeout, a reservation within
// delay when it is above 0 (see WithDelay).
func (c *config) decide(parent context.Context, l algorithms.Limiter, key string, cost int, delay time.Duration) (*decision, algorithms.Result, error) {
	timeout := c.timeout
	if b, ok := l.(algorithms.DecisionBounder); ok {
		bound := b.DecisionTimeout()
		if !c.timeoutSet || timeout >= bound {
			// The limiter keeps a deadline of its own, no later than ours,
			// on its own timers: it needs no context of ours, which would
			// arm a timer per request once asked for Done.
			d := &decision{}
			res, err := c.ask(parent, l, key, cost, delay)
			return d, res, err
		}
	}
	d := newDecision(parent, timeout)
	res, err := c.ask(d, l, key, cost, delay)
	d.release()
	return d, res, err
}
