package redisstore

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/breaker"
)

// FailureMode is what a Redis store's limiter does with a request that Redis
// cannot decide in time: it failed, it did not answer within the timeout,
// the breaker is open, or this process has too many decisions waiting.
type FailureMode int

const (
	// FailLocal, the default, decides in process memory with the same
	// limits (see WithInstances): while Redis is away each instance
	// enforces the limit on its own, so the limit holds per instance and is
	// never absent. The Result's Decider is DecidedLocally.
	FailLocal FailureMode = iota
	// FailOpen lets the request pass uncounted: while Redis is away there is
	// no limit at all. Choose it only where an outage of the limiter must
	// never refuse a request. The Result's Decider is DecidedFailOpen.
	FailOpen
	// FailClosed refuses the request: while Redis is away nothing passes.
	// The Result's Decider is DecidedFailClosed, its RetryAfter one second.
	FailClosed
)

// String returns "FailLocal", "FailOpen" or "FailClosed".
func (m FailureMode) String() string {
	switch m {
	case FailLocal:
		return "FailLocal"
	case FailOpen:
		return "FailOpen"
	case FailClosed:
		return "FailClosed"
	}
	return fmt.Sprintf("FailureMode(%d)", int(m))
}

// BreakerPolicy sets when a Redis store stops asking Redis and decides
// locally instead: at once when Redis refuses a connection (a stopped
// server, see New), after Failures consecutive failed calls, or when
// failures reach Ratio of the calls in one Window once it holds MinCalls
// calls. A failure is an error from Redis or a call that outlived its
// deadline; a decision that waited in this process for its turn (a
// saturated process) is not one. After OpenFor one call probes Redis: its
// success closes the breaker, its failure (or a refused connection while it
// is out) opens it again for twice as long as the time before, up to
// MaxOpenFor, so a long outage costs a probe, and a change of state, ever
// more rarely; a success sets the open time back to OpenFor. A zero field
// takes its default: Failures 5, Ratio 0.5, MinCalls 20, Window 1 s,
// OpenFor 500 ms, MaxOpenFor DefaultMaxOpenFor (or OpenFor if longer).
// MaxOpenFor equal to OpenFor turns the backoff off; below OpenFor, New
// refuses it. The backoff is proved by TestBackoff and TestTrip (package
// internal/breaker) and, against a killed Redis under load, by
// TestOutageBacksOff.
type BreakerPolicy struct {
	Failures   int
	Ratio      float64
	MinCalls   int
	Window     time.Duration
	OpenFor    time.Duration
	MaxOpenFor time.Duration
}

// breakerConfig is p as the breaker takes it, the store's defaults in.
func (p BreakerPolicy) breakerConfig() breaker.Config {
	c := breaker.Config(p).WithDefaults()
	if p.MaxOpenFor == 0 {
		c.MaxOpenFor = max(DefaultMaxOpenFor, c.OpenFor)
	}
	return c
}

// Defaults of the Redis store's options.
const (
	// DefaultTimeout bounds each decision of a Redis store's limiter unless
	// WithTimeout says otherwise; a shorter deadline on the context wins.
	DefaultTimeout = 100 * time.Millisecond
	// DefaultDenialCacheSize is the number of denials a Redis store
	// remembers unless WithDenialCache says otherwise.
	DefaultDenialCacheSize = 100_000
	// maxBatch is the most requests for one key decided by one
	// script call.
	maxBatch = 256
	// maxKeysPerCall is the most keys decided in one flush: the keys
	// of one limiter in one script call (one slot's on Cluster), the
	// calls of other limiters and slots in the same pipeline.
	maxKeysPerCall = 64
	// DefaultMaxOpenFor caps the breaker's open time, which each failed
	// probe doubles from BreakerPolicy.OpenFor, unless the policy says
	// otherwise: during a long outage a store probes Redis every 10 s,
	// and is back on Redis at most 10 s after Redis is.
	DefaultMaxOpenFor = 10 * time.Second
	// DefaultMaxWaiting is the most decisions a Redis store holds waiting
	// for Redis at once unless WithMaxWaiting says otherwise; beyond it a
	// decision is made locally at once.
	DefaultMaxWaiting = 100_000
)

// redisConfig holds the options that only the Redis store uses.
type redisConfig struct {
	timeout     time.Duration
	mode        FailureMode
	instances   int
	breaker     BreakerPolicy
	maxInFlight int // 0: the client's pool size
	maxWaiting  int
	denials     int
	logger      *slog.Logger
	observer    Observer
	noBatching  bool
	// evictionAllowed: Redis decides whatever its maxmemory-policy
	// (WithEvictionAllowed).
	evictionAllowed bool
	leaseTTL        time.Duration // WithLeases; 0: none
	leaseBusy       int           // where keys turn busy; 0: leaseBusy (tests set it)
}

func defaultRedisConfig() redisConfig {
	return redisConfig{timeout: DefaultTimeout, instances: 1, maxWaiting: DefaultMaxWaiting, denials: DefaultDenialCacheSize}
}

// invalid records an option error.
func (c *config) invalid(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%w: "+format, append([]any{algorithms.ErrInvalidOption}, args...)...))
}

// redisOption is an Option that sets a field of the Redis store's
// configuration, or, when the value is not ok, records the error that
// format and args describe.
func redisOption(ok bool, set func(*redisConfig), format string, args ...any) Option {
	return func(c *config) {
		if !ok {
			c.invalid(format, args...)
			return
		}
		set(&c.redis)
	}
}

// WithTimeout bounds each decision of a Redis store's limiter, whatever the
// go-redis client's own timeouts: when Redis has not answered by then, the
// FailureMode decides (default DefaultTimeout). A deadline on the context
// given to Allow that comes sooner wins. The memory store ignores it.
func WithTimeout(d time.Duration) Option {
	return redisOption(d > 0, func(r *redisConfig) { r.timeout = d }, "timeout %s must be positive", d)
}

// WithFailureMode sets what a Redis store's limiter does when Redis cannot
// decide: FailLocal (the default), FailOpen or FailClosed.
func WithFailureMode(m FailureMode) Option {
	return redisOption(m >= FailLocal && m <= FailClosed, func(r *redisConfig) { r.mode = m }, "unknown failure mode %d", int(m))
}

// WithInstances divides the limits that a Redis store enforces locally,
// while Redis cannot decide, by n, the number of application instances
// sharing the limit, so that together they admit about what Redis would
// (each Rate and Burst divided by n, rounded down, at least 1; a bucket's
// Burst lowered further if its share would refill slower than the limit,
// past MaxRefill; limits whose shares coincide enforced once). The default
// is 1: each instance enforces the whole limit on its own.
func WithInstances(n int) Option {
	return redisOption(n >= 1, func(r *redisConfig) { r.instances = n }, "instances %d must be at least 1", n)
}

// WithBreaker sets when a Redis store stops asking Redis (see
// BreakerPolicy). The zero BreakerPolicy means the defaults.
func WithBreaker(p BreakerPolicy) Option {
	bad := p.Failures < 0 || p.Ratio < 0 || p.Ratio > 1 || p.MinCalls < 0 || p.Window < 0 || p.OpenFor < 0 || p.MaxOpenFor < 0 ||
		p.MaxOpenFor != 0 && p.MaxOpenFor < p.breakerConfig().OpenFor
	return redisOption(!bad, func(r *redisConfig) { r.breaker = p },
		"breaker policy %+v has a negative field, a ratio above 1 or a MaxOpenFor below OpenFor", p)
}

// WithMaxInFlight sets how many round trips (a script call, or a pipeline
// of them) a Redis store has in flight at once. The default is twice
// GOMAXPROCS, at most the go-redis client's PoolSize, so a round trip never
// waits for a connection; with batching off, the PoolSize. Fewer make
// longer calls, which cost Redis a little less per decision, and fewer
// calls for the breaker to learn of an outage from. Decisions that
// arrive while all are in flight wait and go together in the next: requests
// for one key in one script call, several keys in one pipeline.
func WithMaxInFlight(n int) Option {
	return redisOption(n >= 1, func(r *redisConfig) { r.maxInFlight = n }, "max in flight %d must be at least 1", n)
}

// WithMaxWaiting sets how many decisions a Redis store holds waiting for
// Redis at once (default DefaultMaxWaiting); a decision beyond it is made
// by the FailureMode at once, as this process is saturated.
func WithMaxWaiting(n int) Option {
	return redisOption(n >= 1, func(r *redisConfig) { r.maxWaiting = n }, "max waiting %d must be at least 1", n)
}

// WithDenialCache sets how many denials a Redis store remembers (default
// DefaultDenialCacheSize): a key that Redis denied with RetryAfter r is
// denied locally, for the same or a larger cost, until r has passed, so a
// flood on one key stops before Redis. 0 turns the cache off.
func WithDenialCache(size int) Option {
	return redisOption(size >= 0, func(r *redisConfig) { r.denials = size }, "denial cache size %d must not be negative", size)
}

// WithLogger sets where a Redis store logs the breaker's changes of state
// and, at most once a second, Redis's errors (default slog.Default()). Keys
// are never logged.
func WithLogger(l *slog.Logger) Option {
	return redisOption(l != nil, func(r *redisConfig) { r.logger = l }, "nil logger")
}

// WithBatching turns batching on (the default) or off. On, the decisions
// in flight at one moment go to Redis together: one script call decides a
// key's concurrent requests (up to 256) in arrival order, the
// keys of one limiter share a script call (one slot's on Cluster), and the
// calls of up to 64 keys travel in one pipeline, so a
// busy store costs Redis far fewer reads, writes and syscalls per
// decision; an idle store sends at once, so nothing waits for a batch to
// fill. Off, every decision is a script call and a round trip of its own:
// for a proxy in front of Redis that refuses scripts with several keys or
// mishandles pipelined EVALSHA, or to count commands one per decision.
func WithBatching(on bool) Option {
	return func(c *config) { c.redis.noBatching = !on }
}

// WithEvictionAllowed lets Redis decide even when its maxmemory-policy may
// evict the store's keys: anything but noeviction, with maxmemory set (every
// key the store writes has a TTL, so volatile-* policies evict them too).
// Without it such a store decides by its FailureMode, and says why in the
// log when it starts and at most once a minute after. With it the store
// does not read the policy, and an evicted state reads as a fresh one: a
// flood of new identities that fills Redis's memory can give an exhausted
// client its whole quota again. For those who take that risk.
func WithEvictionAllowed() Option {
	return func(c *config) { c.redis.evictionAllowed = true }
}
