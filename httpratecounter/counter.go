package httpratecounter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-chi/httprate"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/breaker"
	"github.com/redlimit/redlimit/internal/clusterslot"
	"github.com/redlimit/redlimit/internal/scripts"
	"github.com/redlimit/redlimit/redisstore"
)

// ttlMargin lengthens each counter's life past the two windows it is read
// in, for application servers whose clocks disagree a little about when a
// window ends.
const ttlMargin = time.Second

// minWindow is the shortest window: expiries are set in milliseconds.
// maxWindow is the longest, far below where twice it would overflow a
// Duration and turn the expiry negative (which would delete each count as
// it is written).
const minWindow, maxWindow = time.Millisecond, 366 * 24 * time.Hour

// The scripts, shared by every Counter: go-redis runs them by EVALSHA and
// loads them with EVAL when Redis answers NOSCRIPT.
var (
	incrementScript = redis.NewScript(scripts.HTTPRateIncrement)
	admitScript     = redis.NewScript(scripts.HTTPRateAdmit)
)

// Counter is an httprate.LimitCounter that keeps httprate's per-window
// counts in Redis, so that every instance of a service shares them. It
// works with any redis.UniversalClient: a single server, Sentinel or
// Cluster. Create one with New per httprate limiter; its methods are safe
// for concurrent use.
type Counter struct {
	client  redis.UniversalClient
	opts    options
	keyHead string // "<prefix>:{"
	cfg     atomic.Pointer[limiterConfig]
	breaker *breaker.Breaker
	ids     *callIDs // nil when the client never resends: no kept replies
	onceTTL int64    // ms

	// moving holds the Cluster slots found migrating. While a slot
	// migrates, Redis serves a command only when one node holds all its
	// keys, or none and it has one key; the key of an increment's kept
	// reply never exists before the increment, so an increment that
	// carries it is refused, and is sent once more without it, and the
	// increments of that slot go without it for clusterslot.Hold. Sent
	// again by go-redis after a lost reply, such an increment may count
	// twice. A checked increment (WithStrictLimit) reads two windows'
	// counters, and is still refused while they lie on different nodes or
	// on neither.
	moving clusterslot.Migrating
}

// limiterConfig is what httprate passed to Config, or why it cannot work.
type limiterConfig struct {
	limit  int
	window time.Duration
	err    error // sticky: once set, every call returns it
}

var _ httprate.LimitCounter = (*Counter)(nil)

// New returns a Counter on client. It reports a nil client or an invalid
// option with an error wrapping algorithms.ErrInvalidOption. It makes no
// call to Redis: httprate sets the limit and window later, through Config.
func New(client redis.UniversalClient, opts ...Option) (*Counter, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil Redis client", algorithms.ErrInvalidOption)
	}
	o := options{prefix: DefaultPrefix, timeout: DefaultTimeout}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	c := &Counter{client: client, opts: o, keyHead: o.prefix + ":{", breaker: breaker.New(breaker.Config{}, nil)}
	if resends(client) {
		c.ids, c.onceTTL = newCallIDs(), onceTTL(o.timeout).Milliseconds()
	}
	return c, nil
}

// Config implements httprate.LimitCounter; httprate calls it once, when
// the limiter is built. It cannot return an error, so a configuration that
// cannot work (a limit below 1, a window under a millisecond or over 366
// days, a second call with a different limit or window because one Counter
// was given to two limiters) is kept, reported by Err, and returned by
// every later call, wrapping ErrMisconfigured.
func (c *Counter) Config(requestLimit int, windowLength time.Duration) {
	next := &limiterConfig{limit: requestLimit, window: windowLength}
	switch {
	case requestLimit < 1:
		next.err = fmt.Errorf("%w: %w: limit %d is below 1", ErrMisconfigured, algorithms.ErrInvalidLimit, requestLimit)
	case windowLength < minWindow || windowLength > maxWindow:
		next.err = fmt.Errorf("%w: %w: window %s is not within [%s, %s]", ErrMisconfigured, algorithms.ErrInvalidLimit, windowLength, minWindow, maxWindow)
	}
	for {
		old := c.cfg.Load()
		if old != nil && (old.err != nil || old.limit == requestLimit && old.window == windowLength) {
			return // the first error stays; the same configuration again changes nothing
		}
		if old != nil {
			next = &limiterConfig{err: fmt.Errorf("%w: %w: one Counter configured for %d per %s and for %d per %s; give each httprate limiter its own Counter",
				ErrMisconfigured, algorithms.ErrInvalidLimit, old.limit, old.window, requestLimit, windowLength)}
		}
		if c.cfg.CompareAndSwap(old, next) {
			return
		}
	}
}

// Err reports a configuration the Counter cannot work with, wrapping
// ErrMisconfigured, or nil once httprate has configured it correctly. Call
// it right after building the httprate limiter, so that a mistake stops
// the program at start rather than failing every request.
func (c *Counter) Err() error {
	_, err := c.config()
	return err
}

func (c *Counter) config() (*limiterConfig, error) {
	cfg := c.cfg.Load()
	if cfg == nil {
		return nil, fmt.Errorf("%w: Config was never called; pass the Counter to httprate.WithLimitCounter", ErrMisconfigured)
	}
	return cfg, cfg.err
}

// Get implements httprate.LimitCounter: the counts of key in the windows
// that start at currentWindow and previousWindow, read together with one
// MGET (both counters share a hash tag, so one Cluster node holds them,
// but while their slot migrates each may lie on either node: they are then
// read apart, see Counter.moving). A missing counter is 0.
func (c *Counter) Get(key string, currentWindow, previousWindow time.Time) (int, int, error) {
	if _, err := c.config(); err != nil {
		return 0, 0, err
	}
	tag := hashOf(key)
	keys := []string{c.keyOf(tag, currentWindow), c.keyOf(tag, previousWindow)}
	vals, err := withTimeout(c, func(ctx context.Context) ([]any, error) {
		if c.moving.Holds(tag, time.Now) {
			return c.getApart(ctx, keys)
		}
		vals, err := c.client.MGet(ctx, keys...).Result()
		if err != nil && c.moving.Learn(tag, err, time.Now()) {
			return c.getApart(ctx, keys)
		}
		return vals, err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("%w: get: %w", ErrUnavailable, err)
	}
	if len(vals) != 2 {
		return 0, 0, fmt.Errorf("%w: %w: MGET returned %d values", ErrUnavailable, redisstore.ErrUnexpectedReply, len(vals))
	}
	var counts [2]int
	for i, v := range vals {
		if counts[i], err = countOf(v); err != nil {
			return 0, 0, err
		}
	}
	return counts[0], counts[1], nil
}

// getApart reads keys as MGET does, with a GET each in one pipeline: in a
// migrating Cluster slot, each GET is served by the node that holds its
// key, or by the importing node when neither does.
func (c *Counter) getApart(ctx context.Context, keys []string) ([]any, error) {
	cmds := make([]*redis.StringCmd, len(keys))
	_, _ = c.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.Get(ctx, k)
		}
		return nil
	})
	vals := make([]any, len(keys))
	for i, cmd := range cmds {
		v, err := cmd.Result()
		switch {
		case err == nil:
			vals[i] = v
		case !errors.Is(err, redis.Nil):
			return nil, err
		}
	}
	return vals, nil
}

// countOf reads one MGET value: nil for a missing counter, else a
// non-negative integer in a string.
func countOf(v any) (int, error) {
	if v == nil {
		return 0, nil
	}
	if s, ok := v.(string); ok {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w: %w: counter holds %v", ErrUnavailable, redisstore.ErrUnexpectedReply, v)
}

// Increment implements httprate.LimitCounter: IncrementBy with amount 1.
func (c *Counter) Increment(key string, currentWindow time.Time) error {
	return c.IncrementBy(key, currentWindow, 1)
}

// IncrementBy implements httprate.LimitCounter: it adds amount to key's
// count in the window that starts at currentWindow and renews the
// counter's expiry (two windows and a second, on Redis's clock), in one
// script call, which counts once however often go-redis sends it (see
// callIDs). Under WithStrictLimit the script first checks the limit and
// refuses an amount that does not fit with ErrLimitExceeded. An amount of 0
// counts nothing and makes no call; a negative one is refused with
// ErrMisconfigured, as it would hand quota back.
func (c *Counter) IncrementBy(key string, currentWindow time.Time, amount int) error {
	cfg, err := c.config()
	if err != nil {
		return err
	}
	switch {
	case amount < 0:
		return fmt.Errorf("%w: %w: increment %d is negative", ErrMisconfigured, algorithms.ErrInvalidCost, amount)
	case amount == 0:
		return nil
	}
	tag := hashOf(key)
	ttl := (2*cfg.window + ttlMargin + time.Millisecond - 1).Milliseconds()
	var keys []string
	var args []any
	script := incrementScript
	if c.opts.strict {
		script = admitScript
		keys = []string{c.keyOf(tag, currentWindow), c.keyOf(tag, currentWindow.Add(-cfg.window))}
		args = []any{amount, cfg.limit, currentWindow.UnixMicro(), cfg.window.Microseconds(), ttl}
	} else {
		keys = []string{c.keyOf(tag, currentWindow)}
		args = []any{amount, ttl}
	}
	once := c.ids != nil && !c.moving.Holds(tag, time.Now)
	if once {
		keys = append(keys, c.keyHead+tag+"}:once:"+c.ids.id())
		args = append(args, c.onceTTL)
	}
	n, err := withTimeout(c, func(ctx context.Context) (int64, error) {
		n, err := script.Run(ctx, c.client, keys, args...).Int64()
		if err != nil && once && c.moving.Learn(tag, err, time.Now()) {
			// Not run: the key that kept it from running goes (see
			// Counter.moving).
			n, err = script.Run(ctx, c.client, keys[:len(keys)-1], args[:len(args)-1]...).Int64()
		}
		return n, err
	})
	if err != nil {
		return fmt.Errorf("%w: increment: %w", ErrUnavailable, err)
	}
	if n < 0 {
		return ErrLimitExceeded
	}
	return nil
}

// keyOf is the Redis key of the counter of the client whose hashed key is
// tag, in the window that starts at w: "<prefix>:{<tag>}:<µs since the
// Unix epoch>". Every window of one client has the same hash tag.
func (c *Counter) keyOf(tag string, w time.Time) string {
	return c.keyHead + tag + "}:" + strconv.FormatInt(w.UnixMicro(), 10)
}

// hashOf is the hex of the first 128 bits of key's SHA-256. httprate's key
// is whatever its key function returned, an API key or a token as readily
// as an IP, and must not appear in Redis; a collision-resistant hash also
// keeps a client from choosing a key that shares another client's count.
func hashOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

// errBreakerOpen is the error of a call not made because Redis failed
// repeatedly just before.
var errBreakerOpen = errors.New("not asked: Redis failed repeatedly, the circuit breaker is open")

// withTimeout runs f with the Counter's timeout and returns when f does or
// when the timeout passes, whichever is first: a go-redis client that
// ignores context deadlines cannot hold httprate's lock any longer. A call
// given up on finishes in the background, its answer dropped. While the
// breaker is open f is not called at all: httprate makes every request of
// a limiter wait for the one before, so a Redis that times out each call
// would otherwise slow every request down to one per timeout.
func withTimeout[T any](c *Counter, f func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	ok, probe := c.breaker.Allow(time.Now())
	if !ok {
		return zero, errBreakerOpen
	}
	v, err := runWithin(c.opts.timeout, f)
	c.breaker.Record(time.Now(), err == nil, probe)
	return v, err
}

func runWithin[T any](timeout time.Duration, f func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	type answer struct {
		v   T
		err error
	}
	done := make(chan answer, 1)
	go func() {
		v, err := f(ctx)
		done <- answer{v, err}
	}()
	select {
	case a := <-done:
		return a.v, a.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("no answer within %s: %w", timeout, ctx.Err())
	}
}
