package algorithms

import (
	"fmt"
	"strings"
	"time"
)

// StoreOption configures a store.
type StoreOption func(*storeConfig)

type storeConfig struct {
	prefix  string
	clock   func() time.Time
	sweep   time.Duration
	maxKeys int
	redis   redisConfig // options only the Redis store uses
	errs    []error
}

func newStoreConfig(opts []StoreOption) (storeConfig, error) {
	c := storeConfig{prefix: "rl", clock: time.Now, sweep: time.Minute, maxKeys: DefaultMaxKeys, redis: defaultRedisConfig()}
	for i, o := range opts {
		if o == nil {
			c.invalid("option %d is nil", i)
			continue
		}
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

// WithSweepInterval sets how often the memory store starts a pass over each
// shard to drop the state of keys that went quiet (default one minute). A
// pass starts with the first request a shard serves after the interval and
// proceeds a few entries per request, so no request waits for a whole pass.
func WithSweepInterval(d time.Duration) StoreOption {
	return func(c *storeConfig) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: sweep interval %s must be positive", ErrInvalidOption, d))
			return
		}
		c.sweep = d
	}
}

// DefaultMaxKeys is the memory store's default bound on entries (one per key
// and limit): about 70 to 80 MB of state with short keys.
const DefaultMaxKeys = 1_000_000

// minMaxKeys keeps at least 16 entries in each of 64 shards: room for one
// request's limits and a real choice of what to evict.
const minMaxKeys = 1024

// WithMaxKeys bounds the memory store to about n entries, one per key and
// limit (default DefaultMaxKeys); n must be at least 1024, and math.MaxInt
// leaves the store unbounded. The bound is split evenly over the store's
// shards, so a shard may start evicting a little before the store holds n.
// At the bound the store first drops expired entries, then forgets the
// entry, among a random sample, that is nearest to a fresh state; a key it
// forgets starts afresh, so its client gains at most one quota. See
// MemoryStore.
func WithMaxKeys(n int) StoreOption {
	return func(c *storeConfig) {
		if n < minMaxKeys {
			c.errs = append(c.errs, fmt.Errorf("%w: max keys %d must be at least %d", ErrInvalidOption, n, minMaxKeys))
			return
		}
		c.maxKeys = n
	}
}
