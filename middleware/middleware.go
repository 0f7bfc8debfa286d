package middleware

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"

	"github.com/redlimit/redlimit/algorithms"
)

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

// handler is the middleware around one next handler.
type handler struct {
	c    *config
	next http.Handler
}

// ServeHTTP runs r through the steps of the middleware, each in the file
// of its concern: skip (skip.go), identify (identity.go), decide
// (decision.go), answer (answer.go), and for a request the limit admits,
// wait out its delay (delay.go) and serve it, settling its cost
// (outcome.go).
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := h.c
	if c.skipped(r) {
		h.next.ServeHTTP(w, r)
		return
	}
	key, act := c.identify(w, r)
	if act == proceed {
		v := c.decide(r, key)
		if act = c.answer(w, r, &v); act == admitted {
			// Only an enforced reservation has a Delay: a store's fail-open,
			// fail-closed and local decisions never delay, nor shadow mode.
			if v.res.Delay > 0 && !c.wait(w, r, v.res.Delay) {
				return
			}
			if c.settles() {
				h.serveSettled(w, r, &v)
				return
			}
		}
	}
	if act != answered {
		h.next.ServeHTTP(w, r)
	}
}

// action is what a step leaves the middleware to do with a request.
type action int8

const (
	// proceed: on to the next step.
	proceed action = iota
	// answered: the step wrote the response, or nobody is there to read
	// one.
	answered
	// passOn: to the next handler, with nothing to settle.
	passOn
	// admitted: to the next handler, as a request the limit counted.
	admitted
)
