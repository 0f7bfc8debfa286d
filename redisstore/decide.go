package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/breaker"
	"github.com/redlimit/redlimit/internal/clusterslot"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// guard is what a Redis store's limiters share to decide without letting
// Redis's troubles through: the breaker, the batcher, the denial cache and
// the failure log.
type guard struct {
	clock func() time.Time
	// leaseNow times the leases: the store's clock in Unix ns, cheaply
	// (see leaseClock).
	leaseNow func() int64
	timeout  time.Duration
	mode     FailureMode
	logger   *slog.Logger
	breaker  *breaker.Breaker
	// breakerLog logs the breaker's changes, a few a minute at most.
	breakerLog *breakerLog
	batcher    *batcher
	denials    *denials
	said       *lastSaid    // Redis's last answer per key, for the twin to start from
	ids        *callIDs     // of the script calls, so that each counts once
	lastLog    atomic.Int64 // Unix nanoseconds of the last failure logged

	// releases removes from Redis the concurrency leases it may hold
	// after a fault (see concurrency_releases.go).
	releases *releaseLine

	wheel *deadlineWheel // the deadlines of waiting decisions and calls

	// moving holds the Cluster slots found migrating, whose calls go
	// without the exactly-once key (see migrate.go).
	moving clusterslot.Migrating

	// inline: the client honours a context's deadline, so an idle store's
	// decision can be sent on the caller's goroutine (see flushInline).
	inline bool

	observer Observer // nil: none
	name     string   // the store's prefix, naming it to the observer

	// dials watches the client's dials (nil for a client of another
	// type), so that a refused one ends every wait at once (see
	// dial_watch.go) and the observer hears of a stopped Redis as a
	// connection failure (see kindOf).
	dials *dialWatch

	// reload asks a Cluster client to load the slot map again, at most once
	// a second (lastReload), after a failed call: after a failover the
	// client otherwise keeps sending to the lost master for up to ten
	// seconds. Nil for other clients.
	reload     func()
	lastReload atomic.Int64

	// evict says whether Redis may evict the store's keys, in which case
	// it does not decide (see eviction_watch.go). Nil under
	// WithEvictionAllowed.
	evict *evictionWatch

	// crew counts the goroutines the store starts (crew.go); closed is
	// set by Close, after which nothing is sent to Redis but what Close
	// settles, and the failure mode decides (see close.go).
	crew   *crew
	closed atomic.Bool
}

func newGuard(cfg config, pool int) *guard {
	rc := cfg.redis
	g := &guard{clock: cfg.clock, leaseNow: leaseClock(cfg.clock, cfg.clockSet), timeout: rc.timeout, mode: rc.mode, logger: rc.logger, denials: newDenials(rc.denials),
		wheel:    newDeadlineWheel(),
		observer: rc.observer, name: cfg.prefix, ids: newCallIDs(), said: newLastSaid(lastSaidSlots), crew: newCrew()}
	if g.logger == nil {
		g.logger = slog.Default()
	}
	inFlight := rc.maxInFlight
	if inFlight == 0 {
		// A few round trips in flight keep Redis busy; more would only
		// make the calls shorter, and each costs Redis a read and a
		// script's setup. Fewer would save Redis a little (two rather than
		// four on 2 cores: 0.4-0.7 µs of its CPU per decision at the same
		// requests/s) but give the breaker half the calls to learn of an
		// outage from, so it would open later.
		inFlight = max(1, min(pool, 2*runtime.GOMAXPROCS(0)))
		if rc.noBatching {
			inFlight = max(pool, 1)
		}
	}
	batch, keys := maxBatch, maxKeysPerCall
	if rc.noBatching {
		batch, keys = 1, 1
	}
	g.batcher = newBatcher(inFlight, rc.maxWaiting, batch, keys)
	g.batcher.clock = cfg.clock
	g.batcher.crew = g.crew
	g.batcher.callContext = func() context.Context { return g.wheel.contextFor(g.callTimeout()) }
	g.breakerLog = newBreakerLog(g.logBreaker)
	g.breaker = breaker.New(rc.breaker.breakerConfig(), g.breakerChanged)
	return g
}

// DecisionTimeout implements algorithms.DecisionBounder.
func (l *redisLimiter) DecisionTimeout() time.Duration { return l.guard.timeout }

// Allow implements Limiter. It asks Redis unless the denial cache answers,
// and decides by the store's FailureMode when Redis cannot decide by the
// deadline (the context's, or WithTimeout's if sooner). It returns an
// error only for an invalid request, or the context's error when the
// context was canceled (the caller has gone) before an answer.
func (l *redisLimiter) Allow(ctx context.Context, key string, cost int) (algorithms.Result, error) {
	if err := ratemath.CheckRequest(l.alg, l.limits, key, cost); err != nil {
		return algorithms.Result{}, err
	}
	if ctx == nil {
		ctx = context.Background() // a caller's slip, not worth a panic
	}
	g := l.guard
	if g.closed.Load() {
		return l.fail(key, cost, ErrClosed)
	}
	now := g.clock()
	if res, ok := g.denials.lookup(l, key, cost, now); ok {
		return res, nil
	}
	if err := ctx.Err(); err != nil {
		return l.ended(ctx, key, cost, err)
	}
	if e := g.evict.distrusted(); e != nil {
		return l.fail(key, cost, e)
	}
	ok, probe := g.breaker.Allow(now)
	if !ok {
		return l.fail(key, cost, errBreakerOpen)
	}
	if probe && g.refusing() {
		l.probeAside(key)
		return l.fail(key, cost, errRefused)
	}
	// The context's deadline is on the wall clock, the store's on its own
	// (WithClock): compare what is left of each, not the instants.
	budget, ctxBinds := g.timeout, false
	if d, ok := ctx.Deadline(); ok {
		if left := time.Until(d); left <= budget {
			budget, ctxBinds = left, true
		}
	}
	deadline := now.Add(budget)
	cut := g.wheel.cutOff() // taken before the call can be refused
	w := newWaiter(cost, deadline, probe)
	start, ok := g.batcher.submit(l, key, w)
	if !ok {
		if probe {
			g.breaker.CancelProbe()
		}
		return l.failVia(key, cost, errSaturated, l.localSaturated)
	}
	if start != nil {
		if g.inline {
			g.batcher.flushInline(start)
		} else {
			g.batcher.start(start)
		}
	}

	// Wait on the context alone when its deadline is ours, else on the
	// store's deadline wheel; and on a refused dial (see dial_watch.go).
	select {
	case <-w.done: // flushed inline
		return l.answered(w, key)
	default:
	}
	var expired <-chan struct{}
	if !ctxBinds {
		expired = g.wheel.after(budget)
	}
	var ctxErr error
	select {
	case <-w.done:
		return l.answered(w, key)
	case <-expired:
	case <-cut:
	case <-ctx.Done():
		ctxErr = ctx.Err()
	}
	return l.gaveUp(ctx, key, w, probe, ctxErr, now)
}

// gaveUp answers the request of a waiter, made at began, whose deadline
// passed (ctxErr nil: the store's, or a refused dial ended the wait; else
// the context's) before its answer came: by the answer if it came
// meanwhile, else by the failure mode, charging what the twin admits as
// the charge line says (see owed_charges.go).
func (l *redisLimiter) gaveUp(ctx context.Context, key string, w *waiter, probe bool, ctxErr error, began time.Time) (algorithms.Result, error) {
	g, cost := l.guard, w.cost
	queued := w.state.CompareAndSwap(waiterQueued, waiterAbandoned)
	dropped := !queued && w.state.CompareAndSwap(waiterDropped, waiterAbandoned)
	sent := !queued && !dropped && w.state.CompareAndSwap(waiterSent, waiterAbandoned)
	if !queued && !dropped && !sent {
		<-w.done // delivered meanwhile
		return l.answered(w, key)
	}
	// A sent waiter's call goes on, and its outcome, or its lateness,
	// tells the breaker (late_call.go). A waiter never sent says nothing
	// of Redis's health (this process is saturated), unless a call Redis
	// has not answered in time held it: it failed then, as that call's
	// next would, a probe too.
	switch {
	case queued && ctxErr == nil && g.batcher.heldBehindLate(l, key):
		g.breaker.Record(g.clock(), false, probe)
	case probe && !sent:
		g.breaker.CancelProbe()
	}
	if errors.Is(ctxErr, context.Canceled) {
		return l.ended(ctx, key, cost, ctxErr)
	}
	cause := errQueuedPastDeadline
	switch {
	case ctxErr != nil:
		cause = fmt.Errorf("%w before Redis answered", ctxErr)
	case g.refusedSince(began):
		cause = errRefused
	case sent:
		cause = errNoAnswer
	}
	if sent {
		// Its call may yet count it: owed only if it turns out not to.
		return l.failVia(key, cost, cause, func(key string, cost int) (algorithms.Result, error) {
			return g.batcher.decideSent(l, key, w, func() (algorithms.Result, error) { return l.twinDecides(key, cost) })
		})
	}
	return l.fail(key, cost, cause)
}

// answered returns a delivered waiter's answer, or the failure mode's when
// the call failed, and recycles the waiter.
func (l *redisLimiter) answered(w *waiter, key string) (algorithms.Result, error) {
	res, err, cost, doubt := w.res, w.err, w.cost, w.doubt
	waiters.Put(w)
	if err != nil {
		return l.failVia(key, cost, err, func(key string, cost int) (algorithms.Result, error) {
			return l.guard.batcher.decideAndCharge(l, key, cost, doubt, func() (algorithms.Result, error) { return l.twinDecides(key, cost) })
		})
	}
	return res, nil
}

// ended answers a request whose context ended before Redis answered: a
// canceled context (the caller has gone) gets its error; a passed deadline
// gets the failure mode, as any other decision Redis did not make in time.
func (l *redisLimiter) ended(ctx context.Context, key string, cost int, err error) (algorithms.Result, error) {
	if errors.Is(err, context.Canceled) {
		return algorithms.Result{}, fmt.Errorf("redisstore: %w", context.Cause(ctx))
	}
	return l.fail(key, cost, fmt.Errorf("%w before Redis answered", err))
}

// Why Redis did not decide, for the log.
var (
	errBreakerOpen        = errors.New("redisstore: breaker open")
	errSaturated          = errors.New("redisstore: too many decisions waiting in this process")
	errQueuedPastDeadline = errors.New("redisstore: the deadline passed before a connection was free to send the decision")
	errNoAnswer           = errors.New("redisstore: no answer within the deadline")
	errRefused            = errors.New("redisstore: Redis refused the connection")
)

// fail decides a request that Redis could not, by the store's FailureMode,
// and logs why (at most once a second). What the twin admits is owed to
// Redis (see owed_charges.go).
func (l *redisLimiter) fail(key string, cost int, cause error) (algorithms.Result, error) {
	return l.failVia(key, cost, cause, l.local)
}

// failVia is fail with local as the twin's decision under FailLocal.
func (l *redisLimiter) failVia(key string, cost int, cause error, local func(key string, cost int) (algorithms.Result, error)) (algorithms.Result, error) {
	g := l.guard
	g.logFailure(cause)
	switch g.mode {
	case FailOpen:
		return l.uncounted(true, algorithms.DecidedFailOpen), nil
	case FailClosed:
		return l.uncounted(false, algorithms.DecidedFailClosed), nil
	}
	// A denial Redis issued still holds while Redis cannot answer: the twin,
	// which may not know of it, must not admit in its stead.
	if res, ok := g.denials.held(l, key, cost, g.clock()); ok {
		return res, nil
	}
	return local(key, cost)
}

// local is the local twin's decision of a request Redis could not decide,
// charged to Redis when it admits.
func (l *redisLimiter) local(key string, cost int) (algorithms.Result, error) {
	return l.guard.batcher.decideAndCharge(l, key, cost, callDoubt{}, func() (algorithms.Result, error) { return l.twinDecides(key, cost) })
}

// localSaturated is the twin's decision of a request this process had no
// room to send while Redis still decides for the other instances: from at
// most forgottenAllowance units a window, as for a key the charge table
// has no room for, and charged to Redis when it admits. A share would add
// to what Redis admits elsewhere meanwhile: one unit per instance keeps a
// saturated fleet within L + n (TestScaleSaturation).
func (l *redisLimiter) localSaturated(key string, cost int) (algorithms.Result, error) {
	return l.guard.batcher.decideAndCharge(l, key, cost, callDoubt{}, func() (algorithms.Result, error) {
		return l.decideUnowedLocked(key, cost) // charged all the same: decideAndCharge owes what it admits
	})
}

// twinDecides is the local twin's decision of a request, starting from
// Redis's last answer for the key when there is one (see lastSaid). The
// batcher's lock is held.
func (l *redisLimiter) twinDecides(key string, cost int) (algorithms.Result, error) {
	// A gated key's twin holds what this instance admitted in the fault;
	// Redis's answers since do not know all of it yet.
	if !l.guard.batcher.gatedLocked(queueKey{l, key}, l.guard.clock()) {
		l.startFromRedis(key)
	}
	return l.twinOnly(key, cost)
}

// twinOnly is the twin's decision of a request, from its state as it is.
func (l *redisLimiter) twinOnly(key string, cost int) (algorithms.Result, error) {
	res, lerr := l.twin.Allow(context.Background(), key, cost)
	if lerr == nil {
		res.Index = l.twinIndex[res.Index]
	}
	if errors.Is(lerr, algorithms.ErrCostExceedsLimit) {
		// The cost fits the shared limit but not this instance's share of
		// it: refuse it until Redis can decide.
		res, lerr = l.uncounted(false, algorithms.DecidedLocally), nil
	}
	if lerr != nil {
		return algorithms.Result{}, lerr
	}
	res.Decider = algorithms.DecidedLocally
	return res, nil
}

// uncounted is a decision that nothing counted, described by the first
// limit.
func (l *redisLimiter) uncounted(allowed bool, by algorithms.Decider) algorithms.Result {
	lim := l.limits[0]
	r := algorithms.Result{Allowed: allowed, Limit: ratemath.QuotaOf(l.alg, lim), Period: ratemath.WindowOf(l.alg, lim), Decider: by}
	if !allowed {
		r.RetryAfter = time.Second
		r.ResetAfter = time.Second
	}
	return r
}

// reloadSlots asks a Cluster client to load the slot map again, at most
// once a second.
func (g *guard) reloadSlots() {
	if g.reload == nil {
		return
	}
	now := g.clock().UnixNano()
	last := g.lastReload.Load()
	if now-last >= int64(time.Second) && g.lastReload.CompareAndSwap(last, now) {
		g.reload()
	}
}

// callTimeout is how long a script call may run past its waiters'
// deadline before it counts as failed.
func (g *guard) callTimeout() time.Duration {
	return max(10*g.timeout, time.Second)
}

// logFailure logs why Redis did not decide, at most once a second per
// store. Redis's errors carry no keys. An evicting Redis is the eviction
// watch's to log, at most once a minute.
func (g *guard) logFailure(err error) {
	if _, ok := err.(*evictionError); ok {
		return
	}
	now := g.clock().UnixNano()
	last := g.lastLog.Load()
	if last != 0 && now-last < int64(time.Second) || !g.lastLog.CompareAndSwap(last, now) {
		return
	}
	g.logger.LogAttrs(context.Background(), slog.LevelError, "redlimit: Redis could not decide",
		slog.String("failure_mode", g.mode.String()), slog.Any("error", err))
}
