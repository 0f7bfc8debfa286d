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
	"github.com/redlimit/redlimit/internal/scripts"
)

var concurrencyScript = redis.NewScript(scripts.Concurrency)

// NewConcurrency implements Store: a concurrency limiter on Redis, with a local twin
// of this instance's share of limit for the decisions Redis cannot make.
func (s *Store) NewConcurrency(limit int, lease, retryAfter time.Duration) (algorithms.ConcurrencyLimiter, error) {
	if s == nil || s.guard == nil {
		return nil, fmt.Errorf("%w: a Redis store must come from New", algorithms.ErrInvalidOption)
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
	arg   memberArg  // held's id, as the call's argument
	lease *algorithms.Lease
	err   error
	maybe bool // err, and Redis may have run the script: held may be there
	// queued: the Acquire gave up and the release line took held.
	queued atomic.Bool
}

const (
	callPending int32 = iota
	callDelivered
	callAbandoned
)

// memberArg is a lease's id as its Acquire's argument: it counts how often
// go-redis writes the call (an encoding.BinaryMarshaler is written with
// MarshalBinary each time, as onceArg is). A call written more than once
// may have a copy in Redis's way when its lease is released: that release
// sets the lease's tombstone (see the release line).
type memberArg struct {
	id     []byte
	writes atomic.Int32
}

// MarshalBinary implements encoding.BinaryMarshaler for go-redis's writer.
func (a *memberArg) MarshalBinary() ([]byte, error) {
	a.writes.Add(1)
	return a.id, nil
}

// String shows the id in logs and hooks that print the command.
func (a *memberArg) String() string { return string(a.id) }

// mayHaveRun reports whether a call that failed with err may have run: it
// was written, and not only once with an error reply from Redis, which
// then ran nothing. (go-redis returns the last attempt's error: an earlier
// attempt, written and never answered, may have run.)
func (a *memberArg) mayHaveRun(err error) bool {
	var answer redis.Error
	n := a.writes.Load()
	return n > 1 || n == 1 && !errors.As(err, &answer)
}

// Acquire implements ConcurrencyLimiter: one script call within the
// store's deadline (WithTimeout, or the context's if sooner) whatever the
// client's settings; the store's FailureMode decides when Redis cannot.
func (l *redisConcurrency) Acquire(ctx context.Context, key string) (*algorithms.Lease, error) {
	if err := ratemath.CheckKey(key); err != nil {
		return nil, err
	}
	g := l.guard
	if g.closed.Load() {
		return l.fail(key, ErrClosed, queuedNone)
	}
	now := g.clock()
	if err := ctx.Err(); err != nil {
		return l.ended(ctx, key, err, queuedNone)
	}
	if e := g.evict.distrusted(); e != nil {
		return l.fail(key, e, queuedNone)
	}
	probe, err := g.admit(now)
	if err != nil {
		return l.fail(key, err, queuedNone)
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
		g.unsent(probe)
		return l.fail(key, errSaturated, queuedNone)
	case <-ctx.Done():
		g.unsent(probe)
		return l.ended(ctx, key, ctx.Err(), queuedNone)
	}
	id := ratemath.LeaseSeq.Add(1)
	c := &acquireCall{done: make(chan struct{}), held: redisLease{l.redisKey(key), l.member(id), id}}
	c.arg.id = []byte(c.held.member)
	cut := g.wheel.cutOff() // taken before the call can be refused
	if !g.crew.spawn(func() { l.call(c, key, deadline, probe) }) {
		<-l.slots
		g.unsent(probe)
		return l.fail(key, ErrClosed, queuedNone)
	}

	var ctxErr error
	select {
	case <-c.done:
		return l.answered(c, key)
	case <-t.C:
	case <-cut: // a refused dial (see dial_watch.go): the deadline's way, now
	case <-ctx.Done():
		ctxErr = ctx.Err()
	}
	if !c.state.CompareAndSwap(callPending, callAbandoned) {
		<-c.done // delivered meanwhile
		return l.answered(c, key)
	}
	// The call goes on: the lease it may take is released from Redis by the
	// release line, whose tombstone keeps the call from granting it later.
	q := g.releases.add(c.held)
	c.queued.Store(q == queuedOK)
	if ctxErr != nil {
		return l.ended(ctx, key, ctxErr, q)
	}
	return l.fail(key, errNoAnswer, q)
}

// call runs the script and delivers its answer. A lease Redis may hold
// that nobody would release (its reply was lost, or came after the Acquire
// gave up) goes to the release line: the Acquire gave it there when it
// gave up, unless the line was full; call then tries again, or else
// removes a lease Redis granted once, best effort.
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
	reply, err := concurrencyScript.Run(ctx, l.client, []string{h.rkey, h.tombstone()}, l.limitArg, l.leaseArg, &c.arg).Text()
	if err != nil {
		c.maybe = c.arg.mayHaveRun(err)
		err = fmt.Errorf("redisstore: concurrency: %w", err)
	} else if c.lease, err = l.parse(reply, key, h.id, c.arg.writes.Load() > 1); err != nil {
		c.maybe = true
	}
	g.heard(err, sent, probe)
	c.err = err
	delivered := c.state.CompareAndSwap(callPending, callDelivered)
	if delivered {
		close(c.done)
	}
	late := !delivered && c.lease != nil && c.lease.Allowed
	switch {
	case !delivered && c.arg.writes.Load() == 0:
		// Never written: Redis holds no lease of it.
		g.releases.drop(h)
	case (late || !delivered && c.maybe) && !c.queued.Load() && g.releases.add(h) != queuedOK && late:
		// Best effort, else it expires after the lease.
		_ = l.remove(context.Background(), h, true)
	}
}

// parse reads the script's reply: granted (1), denied (0) or released
// before the call ran (2: only a call the Acquire gave up on can meet its
// tombstone), held, µs until the earliest lease expires. resent says the
// call was written more than once: its release sets the tombstone.
func (l *redisConcurrency) parse(reply, key string, id uint64, resent bool) (*algorithms.Lease, error) {
	var f [3]int64
	if !parseReply(reply, f[:]) || f[0] > 2 {
		return nil, fmt.Errorf("%w: %q", ErrUnexpectedReply, reply)
	}
	held := int(f[1])
	if f[0] != 1 {
		until := time.Duration(f[2]) * time.Microsecond
		if f[0] == 2 {
			until = l.lease
		}
		return &algorithms.Lease{Limit: l.limit, InFlight: held, RetryAfter: l.stats.RetryAfter(until)}, nil
	}
	rl := &redisHeld{
		lease: algorithms.Lease{Allowed: true, Limit: l.limit, InFlight: held, Remaining: max(l.limit-held, 0)},
		owner: l, key: key, id: id, acquired: l.guard.clock(), resent: resent,
	}
	rl.lease.Owner = rl
	return &rl.lease, nil
}

// answered returns a delivered call's lease, or the failure mode's answer;
// a lease Redis may hold for a failed call goes to the release line.
func (l *redisConcurrency) answered(c *acquireCall, key string) (*algorithms.Lease, error) {
	if c.err != nil {
		q := queuedNone
		if c.maybe {
			q = l.guard.releases.add(c.held)
		}
		return l.fail(key, c.err, q)
	}
	return c.lease, nil
}

// ended answers an Acquire whose context ended first: a canceled context
// (the caller has gone) gets its error, a passed deadline the failure mode.
func (l *redisConcurrency) ended(ctx context.Context, key string, err error, q queued) (*algorithms.Lease, error) {
	if errors.Is(err, context.Canceled) {
		return nil, fmt.Errorf("redisstore: %w", context.Cause(ctx))
	}
	return l.fail(key, fmt.Errorf("%w before Redis answered", err), q)
}

// fail decides an Acquire that Redis could not, by the store's FailureMode:
// FailLocal takes a lease of the local twin, released locally. q says
// where the lease Redis may hold for this Acquire went: queuedNone, there
// is none (the call was not sent, or Redis refused it); queuedOK, the
// release line removes it; queuedFull, nowhere, and FailLocal refuses the
// Acquire (see the release line); queuedClosed, nowhere: it expires.
func (l *redisConcurrency) fail(key string, cause error, q queued) (*algorithms.Lease, error) {
	g := l.guard
	g.logFailure(cause)
	switch g.mode {
	case FailOpen:
		return &algorithms.Lease{Allowed: true, Limit: l.limit, Decider: algorithms.DecidedFailOpen}, nil
	case FailClosed:
		return &algorithms.Lease{Limit: l.limit, RetryAfter: time.Second, Decider: algorithms.DecidedFailClosed}, nil
	}
	if q == queuedFull {
		return &algorithms.Lease{Limit: l.limit, RetryAfter: time.Second, Decider: algorithms.DecidedLocally}, nil
	}
	lease, err := l.twin.Acquire(context.Background(), key)
	if err != nil {
		return nil, err
	}
	lease.Decider = algorithms.DecidedLocally
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
	resent   bool // the Acquire's call was written more than once
}

// Release implements the Lease's Owner: one ZREM within the store's
// deadline (and the lease's tombstone, when its call was written more than
// once). While the breaker is open, or when Redis does not answer, the
// release line removes it once Redis answers.
func (h *redisHeld) Release(ctx context.Context) error {
	return h.owner.release(ctx, h.key, h.id, h.acquired, h.resent)
}

func (l *redisConcurrency) release(ctx context.Context, key string, id uint64, acquired time.Time, resent bool) error {
	g := l.guard
	l.stats.Observe(g.clock().Sub(acquired))
	h := redisLease{l.redisKey(key), l.member(id), id}
	err := errBreakerOpen
	if g.breaker.State() != breaker.Open {
		if err = l.remove(ctx, h, resent); err == nil {
			return nil
		}
	}
	var answer redis.Error // Redis answered: sending it again would not change that
	if !errors.As(err, &answer) && g.releases.add(h) == queuedOK {
		return fmt.Errorf("redisstore: concurrency release (sent again until Redis answers): %w", err)
	}
	return fmt.Errorf("redisstore: concurrency release (the lease expires after %s): %w", l.lease, err)
}

// remove deletes a lease from Redis with one ZREM within the store's
// timeout, after setting its tombstone when tomb says a copy of its
// Acquire's call may yet reach Redis.
func (l *redisConcurrency) remove(ctx context.Context, h redisLease, tomb bool) error {
	return l.guard.within(ctx, func(ctx context.Context) error {
		if !tomb {
			return l.client.ZRem(ctx, h.rkey, h.member).Err()
		}
		_, err := l.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, h.tombstone(), "1", l.guard.releases.tombTTL)
			p.ZRem(ctx, h.rkey, h.member)
			return nil
		})
		return err
	})
}

// redisLease names a lease in Redis: its set and its member.
type redisLease struct {
	rkey, member string
	id           uint64
}

// tombstone names the key whose existence tells the acquire script that
// the lease was released: "<set>:<member>", in the set's slot.
func (h redisLease) tombstone() string { return h.rkey + ":" + h.member }

// StoreName returns "redis", for observers.
func (l *redisConcurrency) StoreName() string { return "redis" }
