package middleware

import (
	"fmt"
	"net/http"

	"github.com/redlimit/redlimit/algorithms"
)

// New returns middleware that rate-limits each request with limiter (or the
// one WithLimiterFunc picks) under the key the key function derives.
//
// Configuration that no request could be served with is refused here,
// with an error wrapping algorithms.ErrInvalidOption: a nil limiter or fallback, a
// nil option, a timeout that is not positive, a negative breaker time, an
// invalid policy name, an unknown ErrorPolicy or ResetMode,
// WithSkip(nil), WithChargeIf(nil), a nil clock, a nil pointer as the
// Observer, a WithDelay or WithMaxDelayed out of range or a limiter that
// cannot delay or settle as the options ask. The middleware panics when
// it wraps a nil handler, as http.ServeMux.Handle does.
func New(limiter algorithms.Limiter, opts ...Option) (func(http.Handler) http.Handler, error) {
	c := newConfig()
	c.limiter = limiter
	if err := c.apply(opts); err != nil {
		return nil, err
	}
	if err := c.init(); err != nil {
		return nil, fmt.Errorf("%w: %w", algorithms.ErrInvalidOption, err)
	}
	return func(next http.Handler) http.Handler {
		mustHandle(next)
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
