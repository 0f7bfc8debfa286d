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
// returns Redis's error, wrapped, when Redis cannot answer, at once while
// the breaker is open: an operator's question has no local stand-in.
func (l *redisLimiter) Peek(ctx context.Context, key string) (algorithms.Result, error) {
	if err := ratemath.CheckRequest(l.alg, l.limits, key, 1); err != nil {
		return algorithms.Result{}, err
	}
	var res []algorithms.Result
	err := l.guard.call(ctx, func(ctx context.Context) error {
		var err error
		res, _, err = l.run(ctx, key, "p1", false)
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
// its cached denials of the key (see denialCacheBound); and the store's
// local memory of the key (its cached denials, its local twin's state).
func (l *redisLimiter) Reset(ctx context.Context, key string) error {
	if err := ratemath.CheckRequest(l.alg, l.limits, key, 1); err != nil {
		return err
	}
	keys := make([]string, len(l.limits))
	l.keysOf(key, keys, 0)
	digest := digestOf(key)
	err := l.guard.call(ctx, func(ctx context.Context) error {
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
