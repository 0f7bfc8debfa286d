package redisstore

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
	"github.com/redlimit/redlimit/internal/scripts"
)

var resetScript = redis.NewScript(scripts.Reset)

// Peek implements RateLimiter. On Redis it runs within the store's timeout
// (or the context's sooner deadline) whatever the client's settings, and
// returns Redis's error, wrapped, when Redis cannot answer: an operator's
// question has no local stand-in.
func (l *redisLimiter) Peek(ctx context.Context, key string) (algorithms.Result, error) {
	if err := ratemath.CheckRequest(l.alg, l.limits, key, 1); err != nil {
		return algorithms.Result{}, err
	}
	var res []algorithms.Result
	err := l.within(ctx, func(ctx context.Context) error {
		var err error
		res, err = l.run(ctx, key, "p1", 1, false)
		return err
	})
	if err != nil {
		return algorithms.Result{}, err
	}
	return res[0], nil
}

// Reset implements RateLimiter: one script call that deletes the key's state
// under every limit (one slot on Cluster: the keys share the hash tag) and
// announces it, so that every store on the same Redis and prefix forgets
// its cached denials of the key (see DenialCacheBound); and the store's
// local memory of the key (its cached denials, its local twin's state).
func (l *redisLimiter) Reset(ctx context.Context, key string) error {
	if err := ratemath.CheckRequest(l.alg, l.limits, key, 1); err != nil {
		return err
	}
	keys := make([]string, len(l.limits))
	l.keysOf(key, keys, 0)
	digest := digestOf(key)
	err := l.within(ctx, func(ctx context.Context) error {
		return resetScript.Run(ctx, l.client, keys, l.channel, hex.EncodeToString(digest[:])).Err()
	})
	if err != nil {
		return fmt.Errorf("redisstore: reset: %w", err)
	}
	l.guard.denials.forget(key)
	l.guard.said.forget(l, key)
	l.guard.batcher.forgetCharge(l, key)
	return l.twin.Reset(ctx, key)
}

// within runs f with the store's deadline, returning when it passes even if
// the client would wait longer (f then goes on in the background).
func (l *redisLimiter) within(ctx context.Context, f func(context.Context) error) error {
	return l.guard.within(ctx, f)
}

// within runs f with a deadline of the store's timeout (or ctx's, if
// sooner). On a client that honours a context's deadline (inline) it runs
// f on the caller's goroutine, which f returns to by that deadline; on
// another it runs f on a goroutine of the store's crew, returning when the
// deadline passes even if f would wait longer (f then goes on in the
// background, its context canceled, until the client gives up at its own
// timeouts). A closed store runs nothing and returns ErrClosed. Peek,
// Reset, Reserve, Charge, Refund, a grant of a lease and a concurrency
// lease's release reach Redis through it (TestWithinSpawnsOnlyWhenNeeded).
func (g *guard) within(ctx context.Context, f func(context.Context) error) error {
	if ctx == nil {
		ctx = context.Background() // a caller's slip, not worth a panic
	}
	if g.closed.Load() {
		return ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	if g.inline {
		return f(ctx)
	}
	done := make(chan error, 1)
	if !g.crew.spawn(func() { done <- f(ctx) }) {
		return ErrClosed
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("redisstore: %w", context.Cause(ctx))
	}
}
