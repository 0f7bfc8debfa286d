package middleware

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/breaker"
)

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

// errBroken stands for the limiter's answer while the breaker is open.
var errBroken = errors.New("middleware: limiter skipped while it keeps failing")

// askGuarded is askWithin behind the breaker: while it is open the limiter
// is not asked and errBroken is the answer. Refusals and requests whose
// client went away are no evidence either way. The breaker reads t.after.
func (c *config) askGuarded(ctx context.Context, l algorithms.Limiter, key string, cost int, delay time.Duration, t *readings) (*decision, algorithms.Result, error) {
	if c.breaker == nil {
		return c.askWithin(ctx, l, key, cost, delay)
	}
	ok, probe := true, false
	if !c.breaker.Closed() { // the clock is read only when it matters
		ok, probe = c.breaker.Allow(c.now())
	}
	if !ok {
		return nil, algorithms.Result{}, errBroken
	}
	d, res, err := c.askWithin(ctx, l, key, cost, delay)
	switch {
	case err == nil, c.limiterFailed(ctx, err):
		c.breaker.Record(c.afterTime(t), err == nil, probe)
	case probe:
		c.breaker.CancelProbe()
	}
	return d, res, err
}

// logBreaker logs each change of the breaker's state, once.
func (c *config) logBreaker(from, to breaker.State, reason string) {
	if c.observer != nil && (from == breaker.Closed) != (to == breaker.Closed) {
		c.observer.BreakerChanged(c.policyName, to != breaker.Closed)
	}
	level := slog.LevelWarn
	if to == breaker.Closed {
		level = slog.LevelInfo
	}
	c.logger.LogAttrs(context.Background(), level, "rate limiter breaker "+to.String(),
		slog.String("from", from.String()), slog.String("reason", reason),
		slog.String("failure_policy", c.policy.String()))
}

// logGate lets at most one failure a second through to the log, so that a
// store outage under load cannot flood it.
type logGate struct {
	last       atomic.Int64 // Unix nanoseconds of the last record written
	suppressed atomic.Int64 // failures not logged since then
}

// allow reports whether a record may be written at now (Unix
// nanoseconds), counting it as suppressed if not.
func (g *logGate) allow(now int64) bool {
	last := g.last.Load()
	if last != 0 && now-last < int64(time.Second) || !g.last.CompareAndSwap(last, now) {
		g.suppressed.Add(1)
		return false
	}
	return true
}

// keyHash is a short hash of key for logs, keyed with a secret of this
// process: log lines about one client can be matched, but an IP cannot be
// recovered by hashing all 2^32.
func (c *config) keyHash(key string) string {
	mac := hmac.New(sha256.New, c.logSecret[:])
	mac.Write([]byte(key))
	return hex.EncodeToString(mac.Sum(nil)[:6])
}

// logFailure logs a limiter failure with a hash of the key, never the key:
// keys hold client addresses and credentials' digests.
func (c *config) logFailure(err error, key, policy string) {
	if !c.logGate.allow(c.now().UnixNano()) {
		return
	}
	attrs := make([]slog.Attr, 0, 4)
	attrs = append(attrs, slog.String("failure_policy", policy))
	if key != "" {
		attrs = append(attrs, slog.String("key_hash", c.keyHash(key)))
	}
	attrs = append(attrs,
		slog.Int64("suppressed", c.logGate.suppressed.Swap(0)),
		slog.Any("error", err))
	c.logger.LogAttrs(context.Background(), slog.LevelError, "rate limiter failed", attrs...)
}
