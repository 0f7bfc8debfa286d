package middleware

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// answer is the step that maps v to a response: the limiter's error to
// the failure policy, the store's own fail-open and fail-closed to a pass
// or a 503, a denial to a 429 with the rate-limit headers. An admission
// gets its headers and goes on. In shadow mode nothing is refused and no
// header is sent.
func (c *config) answer(w http.ResponseWriter, r *http.Request, v *verdict) action {
	if v.err != nil {
		return c.answerError(w, r, v)
	}
	outcome := outcomeOf(v.res)
	switch {
	case c.shadow:
		// The limit is not in force: its headers would mislead.
		if !v.res.Allowed && v.res.Decider != algorithms.DecidedFailClosed {
			outcome = OutcomeShadowDenied
			c.shadowDenied(r, v.key)
		}
		c.observe(outcome, v.store, v.took)
		if v.res.Allowed {
			// Settled as when enforced, so the shadow counts tell the
			// truth.
			return admitted
		}
		return passOn
	case v.res.Decider == algorithms.DecidedFailOpen:
		// Uncounted by the store's explicit choice: no headers, which
		// would describe a count that was not made.
		c.observe(outcome, v.store, v.took)
		return passOn
	case v.res.Decider == algorithms.DecidedFailClosed:
		c.observe(outcome, v.store, v.took)
		c.unavailable.write(w, nil)
		return answered
	}
	c.observe(outcome, v.store, v.took)
	ht := headerTextOf(v.d)
	if c.leases {
		c.setLeaseHeaders(w.Header(), v.res) // ht holds the 429's values alone
	} else {
		c.setHeaders(w.Header(), v.res, ht, v.ps, &v.clock)
	}
	if !v.res.Allowed {
		c.writeDenied(w, r, v.res, v.ps, ht)
		return answered
	}
	return admitted
}

// answerError answers a request the limiter (and the fallback) did not
// decide: a refusal of its key or cost, which no limiter would accept,
// or else by the failure policy.
func (c *config) answerError(w http.ResponseWriter, r *http.Request, v *verdict) action {
	if p := c.refusal(v.err); p != nil {
		return c.refuse(w, p, v.store, v.took)
	}
	switch {
	case errors.Is(r.Context().Err(), context.Canceled):
		// The client is gone: nobody reads an answer and the failure is
		// not the limiter's. (A parent deadline that passed is answered by
		// the policy, like any other timeout.)
		return answered
	case c.policy == RefuseOnError:
		c.logFailure(v.err, v.key, "closed")
		c.observe(OutcomeFailClosed, v.store, v.took)
		if c.shadow {
			return passOn
		}
		c.unavailable.write(w, nil)
		return answered
	}
	c.logFailure(v.err, v.key, "open")
	c.observe(OutcomeFailOpen, v.store, v.took)
	return passOn
}

// refuse answers with p a request whose key or cost is refused, or lets
// it pass in shadow mode.
func (c *config) refuse(w http.ResponseWriter, p *problem, store string, took time.Duration) action {
	c.observe(OutcomeInvalid, store, took)
	if c.shadow {
		return passOn
	}
	p.write(w, nil)
	return answered
}

// writeDenied answers a denial: the denied handler's response, or the 429
// naming the policy that bound. Headers are set already, from ht, which
// holds the 429's values too.
func (c *config) writeDenied(w http.ResponseWriter, r *http.Request, res algorithms.Result, ps *policySet, ht *headerText) {
	vals := ht.problem[:]
	switch {
	case c.denied != nil:
		c.denied(w, r, res)
	case ps != nil && res.Index >= 0 && res.Index < len(ps.tooMany):
		ps.tooMany[res.Index].write(w, vals)
	default:
		c.tooMany.write(w, vals)
	}
}
