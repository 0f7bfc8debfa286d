package middleware

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/breaker"
)

// WithChargeIf counts only the responses whose status charge selects: the
// request's cost is reserved before the handler runs, as without it, so a
// burst of slow requests never has more than the quota in flight, and
// given back (refunder) once the handler has returned a status
// charge says no to. For a login route, charge only failures:
//
//	middleware.WithChargeIf(func(status int) bool { return status >= 400 })
//
// The rate-limit headers are sent before the handler runs, from the
// reservation. A handler that panics keeps its charge. WithShadow settles
// too, so its counts are those enforcement would make. The limiter must
// implement a Refund method (every limiter algorithms.New returns
// does); New refuses one that does not, and a nil charge. A limiter
// WithLimiterFunc picks that does not keeps its charge.
func WithChargeIf(charge func(status int) bool) Option {
	return func(c *config) {
		c.chargeIf = charge
		c.chargeIfSet = true
	}
}

// WithCostAfter lets the handler set the request's final cost with SetCost
// once it knows it (rows returned, bytes sent): the cost reserved before
// the handler runs is settled after it. A final cost below the reserved
// one is given back (refunder); one above it is charged for the
// difference once the handler has returned, with algorithms.RateLimiter.Charge, in
// one atomic step that is never refused: each limit takes the difference,
// or, when it has less left, all of it and, where the algorithm can, more
// (a bucket goes into debt), so that a cost far above the quota lets one
// request through a period. A limiter without
// Charge is asked with Allow instead, the difference clamped to its
// quota, then for what is left, in two steps that are not atomic. A
// charge the limiter cannot make (Redis unreachable) is logged.
// Under WithChargeIf a response the predicate does not select costs
// nothing, whatever SetCost said.
func WithCostAfter() Option {
	return func(c *config) { c.costAfter = true }
}

// SetCost sets the final cost of r, the request a handler serves behind
// middleware made WithCostAfter; it may be called from any goroutine while
// the handler runs, the last call winning. It reports false, and does
// nothing, when no such middleware settles r or cost is negative.
func SetCost(r *http.Request, cost int) bool {
	ow, ok := r.Context().Value(outcomeKey{}).(*outcomeWriter)
	if !ok || !ow.costAfter || cost < 0 {
		return false
	}
	ow.final.Store(int64(cost))
	return true
}

// outcomeKey keys the request's outcomeWriter in its context.
type outcomeKey struct{}

// settles reports whether the middleware settles costs after the handler.
func (c *config) settles() bool { return c.chargeIf != nil || c.costAfter }

// checkSettle refuses settlement options that no request could be
// settled with.
func (c *config) checkSettle() error {
	switch {
	case c.chargeIfSet && c.chargeIf == nil:
		return errors.New("WithChargeIf: nil function")
	case c.settles() && !isNil(c.limiter):
		if _, ok := c.limiter.(refunder); !ok {
			return errors.New("WithChargeIf and WithCostAfter need a limiter with Refund, as every algorithms.RateLimiter has")
		}
	}
	return nil
}

// outcomeWriter records the status the handler sends and carries the final
// cost SetCost sets; it passes everything else on.
type outcomeWriter struct {
	http.ResponseWriter
	status    int
	costAfter bool
	final     atomic.Int64 // -1 until SetCost
}

func (w *outcomeWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code // 1xx are interim; the final status follows
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *outcomeWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *outcomeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush implements http.Flusher, for handlers that stream.
func (w *outcomeWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack implements http.Hijacker: the handler takes the connection over,
// and its status is its own business (it counts as 200 here).
func (w *outcomeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// serveSettled is the last step of a request whose cost v reserved when
// the middleware settles costs: it runs next, then settles the cost by the
// outcome.
func (h *handler) serveSettled(w http.ResponseWriter, r *http.Request, v *verdict) {
	c := h.c
	// The age a refund carries is measured on the middleware's clock from
	// here, after the decision: no more than the store's own age of the
	// units but for the refund's transit, so a refund does not reach into
	// a window that began after them.
	decided := c.now()
	ow := &outcomeWriter{ResponseWriter: w, costAfter: c.costAfter}
	ow.final.Store(-1)
	completed := false
	defer func() {
		// A handler that panicked keeps its charge: its outcome is unknown.
		if completed {
			c.settle(r.Context(), v, ow, max(c.now().Sub(decided), 0))
		}
	}()
	h.next.ServeHTTP(ow, r.WithContext(context.WithValue(r.Context(), outcomeKey{}, ow)))
	completed = true
}

// settle gives back or charges the difference between the reserved and the
// final cost. Only a reservation the store itself made is given back: one
// made by a stand-in while the store could not answer is not in the store,
// and a lost refund errs on the strict side.
func (c *config) settle(parent context.Context, v *verdict, ow *outcomeWriter, age time.Duration) {
	lim, key, reserved := v.lim, v.key, v.cost
	final := reserved
	if f := ow.final.Load(); f >= 0 {
		final = int(min(f, int64(^uint(0)>>1)))
	}
	status := ow.status
	if status == 0 {
		status = http.StatusOK // nothing written: net/http sends 200
	}
	if c.chargeIf != nil && !c.chargeIf(status) {
		final = 0
	}
	if final == reserved {
		return
	}
	if v.guarded && c.breaker != nil && c.breaker.State() != breaker.Closed {
		// The limiter has been failing: a settlement that would wait for
		// it keeps the charge.
		return
	}
	// The client may be gone; the settlement is still owed.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), c.timeout)
	defer cancel()
	var err error
	switch {
	case final < reserved:
		rf, ok := lim.(refunder)
		if !ok || v.res.Decider != algorithms.DecidedByStore {
			return
		}
		_, err = rf.Refund(ctx, key, reserved-final, age)
	default:
		err = charge(ctx, lim, key, final-reserved, v.res)
	}
	if err != nil {
		c.logger.LogAttrs(ctx, slog.LevelWarn, "redlimit: settling a request's cost failed",
			slog.Int("reserved", reserved), slog.Int("final", final), slog.Any("error", err))
	}
}

// charge takes cost more units for key, or what is left when that is
// less, so that the requests that follow wait for the quota to come back:
// atomically with algorithms.RateLimiter.Charge. A limiter without it is asked with
// Allow, the cost first clamped to its smallest quota so that it is not
// refused as too large, then, when that is refused, for what it says is
// left: two calls, not atomic.
func charge(ctx context.Context, lim algorithms.Limiter, key string, cost int, res algorithms.Result) error {
	if ch, ok := lim.(charger); ok {
		_, err := ch.Charge(ctx, key, cost)
		return err
	}
	if q := smallestQuota(lim, res); q > 0 {
		cost = min(cost, q)
	}
	more, err := lim.Allow(ctx, key, cost)
	if err == nil && !more.Allowed && more.Remaining > 0 {
		_, err = lim.Allow(ctx, key, more.Remaining)
	}
	return err
}

// smallestQuota is the most one request may cost under lim: the smallest
// quota its Policies list, or else the reservation's Limit; 0 if unknown.
func smallestQuota(lim algorithms.Limiter, res algorithms.Result) int {
	q := 0
	if d, ok := lim.(describer); ok {
		for _, p := range d.Policies() {
			if p.Quota > 0 && (q == 0 || p.Quota < q) {
				q = p.Quota
			}
		}
	}
	if q == 0 {
		return res.Limit
	}
	return q
}
