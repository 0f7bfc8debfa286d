package redisstore

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The rhythm of a store's eviction watch: it reads the policy again every
// evictionCheckEvery (CONFIG SET changes it at runtime), or after
// evictionRetryEvery when Redis did not answer; each read may take
// evictionReadTimeout; while it distrusts Redis it says so in the log at
// most every evictionLogEvery. Variables, so that tests can shorten them;
// a store takes their values when it is made.
var (
	evictionCheckEvery  = time.Minute
	evictionRetryEvery  = time.Second
	evictionReadTimeout = 5 * time.Second
	evictionLogEvery    = time.Minute
)

// evictionWatch keeps a store from letting an evicting Redis decide (see
// eviction_policy.go). A goroutine of the store's reads the policy when
// the store is made and every evictionCheckEvery after, until Close or
// until the client is closed; a decision only loads distrust. While the
// policy may evict, distrust holds why, and decisions go to the
// FailureMode with it as their cause (TestStoreDistrustsEvictingRedis,
// TestEvictionPolicyChangedAtRuntime). A policy Redis will not tell is
// trusted and logged once (TestEvictionPolicyUnreadable); one Redis did
// not answer for leaves the last verdict as it was.
type evictionWatch struct {
	client redis.UniversalClient
	logger *slog.Logger
	mode   FailureMode

	// evictionCheckEvery, evictionRetryEvery, evictionReadTimeout and
	// evictionLogEvery when the store was made.
	every, retry, readTimeout, logEvery time.Duration

	distrust atomic.Pointer[evictionError] // nil: Redis decides
	lastLog  atomic.Int64                  // wall UnixNano of the last distrust logged

	unreadLogged bool // the watch's goroutine only

	cancel context.CancelFunc
	first  chan struct{} // closed after the first read
	done   chan struct{} // closed when the goroutine has returned
}

// watchEviction starts a store's eviction watch, on a goroutine of the
// store's crew.
func watchEviction(client redis.UniversalClient, logger *slog.Logger, mode FailureMode, c *crew) *evictionWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &evictionWatch{client: client, logger: logger, mode: mode, cancel: cancel,
		every: evictionCheckEvery, retry: evictionRetryEvery, readTimeout: evictionReadTimeout, logEvery: evictionLogEvery,
		first: make(chan struct{}), done: make(chan struct{})}
	if !c.spawn(func() { w.run(ctx) }) {
		close(w.first)
		close(w.done)
	}
	return w
}

// distrusted returns why Redis may not decide, or nil. A nil watch (the
// store accepts eviction) never distrusts.
func (w *evictionWatch) distrusted() *evictionError {
	if w == nil {
		return nil
	}
	return w.distrust.Load()
}

// await waits for the first read, at most d, or until cut closes (Redis
// refused a connection: the read will get no answer): until it ends Redis
// is trusted, as before the store knew of the policy.
func (w *evictionWatch) await(d time.Duration, cut <-chan struct{}) {
	if w == nil {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.first:
	case <-t.C:
	case <-cut:
	}
}

// stop stops the watch; the store's crew waits for its goroutine (a
// read in flight ends at its deadline, evictionReadTimeout at most, or
// sooner on a client that honours a context's cancellation).
func (w *evictionWatch) stop() {
	if w != nil {
		w.cancel()
	}
}

// run reads the policy until ctx ends or the client is closed; a read
// Redis did not answer is tried again after retry, doubling up to every.
func (w *evictionWatch) run(ctx context.Context) {
	defer close(w.done)
	pause := w.retry
	for first := true; ; first = false {
		rctx, cancel := context.WithTimeout(ctx, w.readTimeout)
		err := readEvictionPolicy(rctx, w.client)
		cancel()
		stop := ctx.Err() != nil || errors.Is(err, redis.ErrClosed)
		wait := w.every
		switch {
		case stop:
		case w.apply(ctx, err):
			pause = w.retry
		default:
			wait, pause = pause, min(2*pause, w.every)
		}
		if first {
			close(w.first)
		}
		if stop {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// apply takes a read's verdict; it reports false for a read Redis did not
// answer, which leaves the last verdict as it was.
func (w *evictionWatch) apply(ctx context.Context, err error) bool {
	var evicts *evictionError
	switch {
	case err == nil:
		if w.distrust.Swap(nil) != nil {
			w.logger.LogAttrs(ctx, slog.LevelInfo, "redlimit: Redis no longer evicts rate-limit state; it decides again")
		}
		w.unreadLogged = false
	case errors.As(err, &evicts):
		if w.distrust.Swap(evicts) == nil {
			w.lastLog.Store(0) // a new distrust is always logged
		}
		w.remind(ctx, evicts)
	case errors.Is(err, ErrEvictionPolicyUnreadable):
		w.distrust.Store(nil)
		if !w.unreadLogged {
			w.unreadLogged = true
			w.logger.LogAttrs(ctx, slog.LevelWarn, "redlimit: could not read Redis's maxmemory-policy; trusting Redis to keep rate-limit state. "+
				"Check by hand that CONFIG GET maxmemory-policy answers noeviction (or maxmemory is 0)",
				slog.String("error", err.Error()))
		}
	default:
		return false
	}
	return true
}

// remind logs why Redis does not decide, at most every logEvery.
func (w *evictionWatch) remind(ctx context.Context, e *evictionError) {
	now := time.Now().UnixNano()
	last := w.lastLog.Load()
	if last != 0 && now-last < int64(w.logEvery) || !w.lastLog.CompareAndSwap(last, now) {
		return
	}
	w.logger.LogAttrs(ctx, slog.LevelError, "redlimit: Redis may evict rate-limit state; decisions are made by the failure mode until its maxmemory-policy is noeviction (or accept the risk: redisstore.WithEvictionAllowed)",
		slog.String("maxmemory_policy", e.policy), slog.String("maxmemory", e.maxmemory),
		slog.String("failure_mode", w.mode.String()))
}
