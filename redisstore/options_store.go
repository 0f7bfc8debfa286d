package redisstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// Option configures a Redis store.
type Option func(*config)

type config struct {
	prefix string
	clock  func() time.Time
	// clockSet: WithClock set clock, which the leases then read as it is
	// (see leaseClock).
	clockSet bool
	redis    redisConfig // options only the Redis store uses
	errs     []error
}

func newConfig(opts []Option) (config, error) {
	c := config{prefix: "rl", clock: time.Now, redis: defaultRedisConfig()}
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
func WithPrefix(p string) Option {
	return func(c *config) {
		if err := CheckPrefix(p); err != nil {
			c.errs = append(c.errs, err)
			return
		}
		c.prefix = p
	}
}

// CheckPrefix returns ErrInvalidOption (wrapped) when WithPrefix would
// refuse p, so that a configuration can be checked before a store is made.
func CheckPrefix(p string) error {
	if p == "" || strings.ContainsAny(p, "{}") || len(p) > 64 {
		return fmt.Errorf("%w: prefix %q must be 1 to 64 bytes without braces", algorithms.ErrInvalidOption, p)
	}
	return nil
}

// WithClock sets the store's own clock (default time.Now), so tests can
// move time without sleeping. The scripts take the time from the Redis
// server; this clock only times the store's local side: the deadline of a
// decision, the denial cache and the local twin.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: nil clock", algorithms.ErrInvalidOption))
			return
		}
		c.clock, c.clockSet = now, true
	}
}
