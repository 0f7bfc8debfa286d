package algorithms

import (
	"fmt"
	"strings"
	"time"
)

// StoreOption configures a store.
type StoreOption func(*storeConfig)

type storeConfig struct {
	prefix string
	clock  func() time.Time
	sweep  time.Duration
	redis  redisConfig // options only the Redis store uses
	errs   []error
}

func newStoreConfig(opts []StoreOption) (storeConfig, error) {
	c := storeConfig{prefix: "rl", clock: time.Now, sweep: time.Minute, redis: defaultRedisConfig()}
	for _, o := range opts {
		o(&c)
	}
	if len(c.errs) > 0 {
		return c, c.errs[0]
	}
	return c, nil
}

// WithPrefix sets the first part of every Redis key the store writes
// (default "rl"), so several applications can share one Redis. The prefix
// must be 1 to 64 bytes without '{' or '}', which would move the hash tag.
func WithPrefix(p string) StoreOption {
	return func(c *storeConfig) {
		if p == "" || strings.ContainsAny(p, "{}") || len(p) > 64 {
			c.errs = append(c.errs, fmt.Errorf("%w: prefix %q must be 1 to 64 bytes without braces", ErrInvalidOption, p))
			return
		}
		c.prefix = p
	}
}

// WithClock sets the memory store's clock (default time.Now), so tests can
// move time without sleeping. The Redis store's scripts take the time from
// the Redis server; its own clock (this one) only times its local side: the
// deadline of a decision, the denial cache and the local twin.
func WithClock(now func() time.Time) StoreOption {
	return func(c *storeConfig) {
		if now == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: nil clock", ErrInvalidOption))
			return
		}
		c.clock = now
	}
}

// WithSweepInterval sets how often the memory store drops the state of keys
// that went quiet (default one minute). Each shard is swept by the first
// request it serves after the interval has passed.
func WithSweepInterval(d time.Duration) StoreOption {
	return func(c *storeConfig) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: sweep interval %s must be positive", ErrInvalidOption, d))
			return
		}
		c.sweep = d
	}
}
