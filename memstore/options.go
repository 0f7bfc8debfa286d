package memstore

import (
	"fmt"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// Option configures a memory store.
type Option func(*config)

type config struct {
	clock    func() time.Time // what the concurrency leases read
	setClock func() time.Time // WithClock's, or nil
	sweep    time.Duration
	maxKeys  int
	errs     []error
}

func newConfig(opts []Option) (config, error) {
	c := config{clock: time.Now, sweep: time.Minute, maxKeys: DefaultMaxKeys}
	for i, o := range opts {
		if o == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: option %d is nil", algorithms.ErrInvalidOption, i))
			continue
		}
		o(&c)
	}
	if len(c.errs) > 0 {
		return c, c.errs[0]
	}
	return c, nil
}

// WithClock sets the store's clock, so tests can move time without
// sleeping. By default rate limits read the monotonic clock, counted from
// the wall time at New (so a wall clock stepped back or forth moves no
// limit), and concurrency leases read time.Now.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: nil clock", algorithms.ErrInvalidOption))
			return
		}
		c.clock, c.setClock = now, now
	}
}

// WithSweepInterval sets how often the memory store starts a pass over each
// shard to drop the state of keys that went quiet (default one minute). A
// pass starts with the first request a shard serves after the interval and
// proceeds a few entries per request, so no request waits for a whole pass.
func WithSweepInterval(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: sweep interval %s must be positive", algorithms.ErrInvalidOption, d))
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
// forgets starts from what it had left (at least one unit), not afresh.
// See Store.
func WithMaxKeys(n int) Option {
	return func(c *config) {
		if n < minMaxKeys {
			c.errs = append(c.errs, fmt.Errorf("%w: max keys %d must be at least %d", algorithms.ErrInvalidOption, n, minMaxKeys))
			return
		}
		c.maxKeys = n
	}
}
