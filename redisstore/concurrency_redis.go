package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/breaker"
	"github.com/redlimit/redlimit/internal/ratemath"
	"github.com/redlimit/redlimit/lua"
)

var concurrencyScript = redis.NewScript(lua.Concurrency)

// NewConcurrency implements Store: a concurrency limiter on Redis, with a local twin
// of this instance's share of limit for the decisions Redis cannot make.
func (s *Store) NewConcurrency(limit int, lease, retryAfter time.Duration) (algorithms.ConcurrencyLimiter, error) {
	if s == nil || s.err == nil && s.guard == nil {
		return nil, fmt.Errorf("%w: a Redis store must come from New", algorithms.ErrInvalidOption)
	}
	if s.err != nil {
		return nil, s.err
	}
	twin, err := s.local.NewConcurrency(ratemath.ShareOfLimit(limit, s.cfg.redis.instances), lease, retryAfter)
	if err != nil {
		return nil, err
	}
	return &redisConcurrency{
		client: s.client, guard: s.guard, limit: limit, lease: lease,
		prefix: s.cfg.prefix + ":{", suffix: "}:cc",
		limitArg: strconv.Itoa(limit), leaseArg: strconv.FormatInt(lease.Microseconds(), 10),
		twin: twin, stats: &ratemath.HoldStats{Fixed: retryAfter},
		slots: make(chan struct{}, max(poolSize(s.client), 1)),
	}, nil
}

// redisConcurrency is a concurrency limit in Redis. Keys are
// "<prefix>:{<key>}:cc", hash-tagged like the rate limits' keys. They name
// no maximum: limiters of a rollout that changes it share one lease set.
type redisConcurrency struct {
	client             redis.UniversalClient
	guard              *guard
	limit              int
	lease              time.Duration
	prefix, suffix     string
	limitArg, leaseArg string
	twin               algorithms.ConcurrencyLimiter // in memory
	stats              *ratemath.HoldStats
	slots              chan struct{} // script calls in flight, at most the pool's size, so none waits for a connection
}

func (l *redisConcurrency) redisKey(key string) string { return l.prefix + hashTagSafe(key) + l.suffix }

// member is a lease's name in Redis: its id and, after a slash, the lease
// it was taken for, so that the script can bound its expiry when Redis's
// clock was ahead.
func (l *redisConcurrency) member(id uint64) string { return ratemath.Member(id) + "/" + l.leaseArg }

// acquireCall is one script call, which may outlive the Acquire that made
// it: state says who got there first.
type acquireCall struct {
	state atomic.Int32 // callPending, then callDelivered or callAbandoned
	done  chan struct{}
	held  redisLease // the lease it asks Redis for
	lease *algorithms.Lease
	err   error
	maybe bool // err, and Redis may have run the script: held may be there
}

const (
	callPending int32 = iota
	callDelivered
	callAbandoned
)

// Acquire implements ConcurrencyLimiter: one script call within the
// store's deadline (WithTimeout, or the context's if sooner) whatever the
// client's settings; the store's FailureMode decides when Redis cannot.
func (l *redisConcurrency) Acquire(ctx context.Context, key string) (*algorithms.Lease, error) {
	if err := ratemath.CheckKey(key); err != nil {
		return nil, err
	}
	g := l.guard
	now := g.clock()
	if err := ctx.Err(); err != nil {
		return l.ended(ctx, key, err)
	}
	if e := g.evict.distrusted(); e != nil {
		return l.fail(key, e, nil)
	}
	ok, probe := g.breaker.Allow(now)
	if !ok {
		return l.fail(key, errBreakerOpen, nil)
	}
	deadline := now.Add(g.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	t := time.NewTimer(deadline.Sub(now))
	defer t.Stop()
	// Calls in flight are bounded by the client's pool: the rest wait for
	// one to end, until the deadline, as they would for a connection.
	select {
	case l.slots <- struct{}{}:
	case <-t.C:
		if probe {
			g.breaker.CancelProbe()
		}
		return l.fail(key, errSaturated, nil)
	case <-ctx.Done():
		if probe {
			g.breaker.CancelProbe()
		}
		return l.ended(ctx, key, ctx.Err())
	}
	id := ratemath.LeaseSeq.Add(1)
	c := &acquireCall{done: make(chan struct{}), held: redisLease{l.redisKey(key), l.member(id), id}}
	go l.call(c, key, deadline, probe)

	var ctxErr error
	select {
	case <-c.done:
		return l.answered(c, key)
	case <-t.C:
	case <-ctx.Done():
		ctxErr = ctx.Err()
	}
	if !c.state.CompareAndSwap(callPending, callAbandoned) {
		<-c.done // delivered meanwhile
		return l.answered(c, key)
	}
	if ctxErr != nil {
		return l.ended(ctx, key, ctxErr)
	}
	// The call goes on and gives back a lease Redis grants late; the
	// stand-in gives it back too, should that fail.
	return l.fail(key, errNoAnswer, &c.held)
}

// call runs the script and delivers its answer. It gives back a lease
// Redis granted that nobody would release: one granted after the Acquire
// that made it gave up, or one Redis may have granted when the reply was
// lost (the caller is answered by the FailureMode instead).
func (l *redisConcurrency) call(c *acquireCall, key string, deadline time.Time, probe bool) {
	defer func() { <-l.slots }()
	g := l.guard
	sent := g.clock()
	// Like the rate limits' calls, it may outlive its deadline, so that a
	// late reply does not tear a connection down and the breaker hears of
	// Redis's health; past callTimeout it has failed.
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(g.callTimeout()))
	defer cancel()
	h := c.held
	reply, err := concurrencyScript.Run(ctx, l.client, []string{h.rkey}, l.limitArg, l.leaseArg, h.member).Text()
	var answered redis.Error // Redis refused the script: it ran nothing
	if err != nil {
		c.maybe = !errors.As(err, &answered)
		err = fmt.Errorf("redisstore: concurrency: %w", err)
	} else if c.lease, err = l.parse(reply, key, h.id); err != nil {
		c.maybe = true
	}
	g.breaker.Record(g.clock(), err == nil || classify(err) == ErrorScript, probe)
	if err != nil {
		g.reloadSlots()
		g.reportError(err, sent)
	}
	c.err = err
	delivered := c.state.CompareAndSwap(callPending, callDelivered)
	if delivered {
		close(c.done)
	}
	late := !delivered && c.lease != nil && c.lease.Allowed
	if late || c.maybe && g.breaker.State() != breaker.Open {
		// Best effort, else it expires after the lease; a stand-in's
		// release tries again.
		_ = l.remove(context.Background(), h)
	}
}

// parse reads the script's reply: allowed, held, µs until the earliest
// lease expires.
func (l *redisConcurrency) parse(reply, key string, id uint64) (*algorithms.Lease, error) {
	var f [3]int64
	if !parseReply(reply, f[:]) || f[0] > 1 {
		return nil, fmt.Errorf("%w: %q", ErrUnexpectedReply, reply)
	}
	held := int(f[1])
	if f[0] == 0 {
		until := time.Duration(f[2]) * time.Microsecond
		return &algorithms.Lease{Limit: l.limit, InFlight: held, RetryAfter: l.stats.RetryAfter(until)}, nil
	}
	rl := &redisHeld{
		lease: algorithms.Lease{Allowed: true, Limit: l.limit, InFlight: held, Remaining: max(l.limit-held, 0)},
		owner: l, key: key, id: id, acquired: l.guard.clock(),
	}
	rl.lease.Owner = rl
	return &rl.lease, nil
}

// answered returns a delivered call's lease, or the failure mode's answer.
func (l *redisConcurrency) answered(c *acquireCall, key string) (*algorithms.Lease, error) {
	if c.err != nil {
		var held *redisLease
		if c.maybe {
			held = &c.held
		}
		return l.fail(key, c.err, held)
	}
	return c.lease, nil
}

// ended answers an Acquire whose context ended first: a canceled context
// (the caller has gone) gets its error, a passed deadline the failure mode.
func (l *redisConcurrency) ended(ctx context.Context, key string, err error) (*algorithms.Lease, error) {
	if errors.Is(err, context.Canceled) {
		return nil, fmt.Errorf("redisstore: %w", context.Cause(ctx))
	}
	return l.fail(key, fmt.Errorf("%w before Redis answered", err), nil)
}

// fail decides an Acquire that Redis could not, by the store's FailureMode:
// FailLocal takes a lease of the local twin, released locally. held, when
// not nil, is a lease Redis may hold for this Acquire (its call was sent
// and never answered): an admitted stand-in removes it when released.
func (l *redisConcurrency) fail(key string, cause error, held *redisLease) (*algorithms.Lease, error) {
	g := l.guard
	g.logFailure(cause)
	var lease *algorithms.Lease
	switch g.mode {
	case FailOpen:
		lease = &algorithms.Lease{Allowed: true, Limit: l.limit, Decider: algorithms.DecidedFailOpen}
	case FailClosed:
		return &algorithms.Lease{Limit: l.limit, RetryAfter: time.Second, Decider: algorithms.DecidedFailClosed}, nil
	default:
		var err error
		if lease, err = l.twin.Acquire(context.Background(), key); err != nil {
			return nil, err
		}
		lease.Decider = algorithms.DecidedLocally
	}
	if held != nil && lease.Allowed {
		lease.Owner = &standIn{redis: l, local: lease.Owner, held: *held}
	}
	return lease, nil
}

// redisHeld is a lease taken in Redis, with what its release needs: one
// allocation per lease.
type redisHeld struct {
	lease    algorithms.Lease
	owner    *redisConcurrency
	key      string
	id       uint64
	acquired time.Time
}

// Release implements the Lease's Owner: one ZREM within the store's
// deadline. While the breaker is open Redis is not asked: the lease expires
// there.
func (h *redisHeld) Release(ctx context.Context) error {
	return h.owner.release(ctx, h.key, h.id, h.acquired)
}

func (l *redisConcurrency) release(ctx context.Context, key string, id uint64, acquired time.Time) error {
	g := l.guard
	l.stats.Observe(g.clock().Sub(acquired))
	if g.breaker.State() == breaker.Open {
		return fmt.Errorf("redisstore: concurrency release: %w; the lease expires after %s", errBreakerOpen, l.lease)
	}
	if err := l.remove(ctx, redisLease{l.redisKey(key), l.member(id), id}); err != nil {
		return fmt.Errorf("redisstore: concurrency release (the lease expires after %s): %w", l.lease, err)
	}
	return nil
}

// remove deletes a lease from Redis with one ZREM within the store's
// timeout.
func (l *redisConcurrency) remove(ctx context.Context, h redisLease) error {
	return within(ctx, l.guard.timeout, func(ctx context.Context) error { return l.client.ZRem(ctx, h.rkey, h.member).Err() })
}

// redisLease names a lease in Redis: its set and its member.
type redisLease struct {
	rkey, member string
	id           uint64
}

// standIn owns a lease the FailureMode admitted in place of one Redis may
// hold (the Acquire's call was sent and its reply never came): releasing
// it releases the local lease, if any, and removes the one in Redis, so
// that Redis's does not hold a slot for the whole lease.
type standIn struct {
	redis *redisConcurrency
	local interface{ Release(context.Context) error } // the local lease's Owner; nil for FailOpen
	held  redisLease
}

// Release implements the stand-in lease's Owner. Removing Redis's lease is best effort
// and never an error: the stand-in itself is released, and Redis's lease,
// if any, expires after the lease. While the breaker is open Redis is not
// asked.
func (s *standIn) Release(ctx context.Context) error {
	var err error
	if s.local != nil {
		err = s.local.Release(ctx)
	}
	if s.redis.guard.breaker.State() != breaker.Open {
		_ = s.redis.remove(ctx, s.held)
	}
	return err
}

// StoreName returns "redis", for observers.
func (l *redisConcurrency) StoreName() string { return "redis" }
