package middleware

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// DefaultMaxDelayed bounds the requests that one middleware holds while
// they wait out a WithDelay, unless WithMaxDelayed says otherwise.
const DefaultMaxDelayed = 1000

// WithDelay shapes traffic instead of refusing it: a request that the limit
// would admit within max is admitted now, its slot taken at once in the
// same atomic decision (on Redis's clock for a Redis store), and held for
// the wait before it is passed on; one that would wait longer gets 429 as
// without it. It needs a limiter that can reserve (Algorithm.CanReserve:
// the token bucket and the leaky bucket); New refuses any other, and
// a max that is not positive or is above algorithms.MaxDelay, as
// misconfiguration. A limiter that WithLimiterFunc picks, or the fallback,
// that cannot reserve decides without delay. In shadow mode nothing waits.
//
// A delayed request's headers describe its reservation: Remaining is 0, and
// the reset is when the quota is whole again, counting the slots reserved.
// When the client goes away while it waits, the request is dropped and its
// slot is not given back: the limiter cannot tell it from the slots of the
// requests reserved after it, and giving back a slot not the last would let
// those go sooner than the limit allows. A request whose context ends for
// a deadline while it waits gets 503.
func WithDelay(max time.Duration) Option {
	return func(c *config) { c.delay, c.delaySet = max, true }
}

// WithMaxDelayed bounds the requests this middleware holds waiting out a
// WithDelay at once (default DefaultMaxDelayed): beyond it, a request is
// decided without delay, so it passes at once or gets 429 with Retry-After
// as without WithDelay. A bound below 1 is refused by New.
func WithMaxDelayed(n int) Option {
	return func(c *config) { c.maxWaiting = n }
}

// checkDelay checks WithDelay and WithMaxDelayed against the limiters.
func (c *config) checkDelay() error {
	switch {
	case c.maxWaiting < 1:
		return fmt.Errorf("WithMaxDelayed(%d): the bound must be at least 1", c.maxWaiting)
	case !c.delaySet:
		return nil
	case c.delay <= 0 || c.delay > algorithms.MaxDelay:
		return fmt.Errorf("WithDelay(%s): the delay must be above 0 and at most %s", c.delay, algorithms.MaxDelay)
	case !canReserve(c.limiter):
		return errors.New("WithDelay: the limiter cannot delay a request (only the token and leaky buckets of algorithms.New can)")
	}
	return nil
}

// delayFor is the longest delay l may give a request: 0 when the
// middleware does not delay or l cannot.
func (c *config) delayFor(l algorithms.Limiter) time.Duration {
	if c.delay <= 0 || c.shadow || !canReserve(l) {
		return 0
	}
	return c.delay
}

// canReserve reports whether l is a RateLimiter of an algorithm that can
// reserve (Algorithm.CanReserve).
func canReserve(l algorithms.Limiter) bool {
	r, ok := l.(algorithms.RateLimiter)
	return ok && r.Algorithm().CanReserve()
}

// ask asks l to decide, reserving within delay when it is above 0 and the
// waiting bound has room. A Result with Delay above 0 holds a place among
// the waiting, which wait gives back.
func (c *config) ask(ctx context.Context, l algorithms.Limiter, key string, cost int, delay time.Duration) (algorithms.Result, error) {
	if delay <= 0 {
		return l.Allow(ctx, key, cost)
	}
	r, ok := l.(reserver)
	if !ok {
		return l.Allow(ctx, key, cost)
	}
	if c.waiting.Add(1) > int64(c.maxWaiting) {
		// Full: decided as without WithDelay.
		c.waiting.Add(-1)
		return l.Allow(ctx, key, cost)
	}
	res, err := r.Reserve(ctx, key, cost, delay)
	if err != nil || !res.Allowed || res.Delay <= 0 {
		c.waiting.Add(-1)
	}
	return res, err
}

// wait holds a request for its reservation's delay, and gives back its
// place among the waiting. It reports whether the request may go on; when
// it may not, it has answered the request if anyone is there to read it.
func (c *config) wait(w http.ResponseWriter, r *http.Request, d time.Duration) bool {
	defer c.waiting.Add(-1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	}
	if errors.Is(r.Context().Err(), context.DeadlineExceeded) {
		c.unavailable.write(w, nil)
	}
	// Canceled: the client is gone and nobody reads an answer.
	return false
}
