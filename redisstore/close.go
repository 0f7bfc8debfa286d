package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlimit/redlimit/internal/pause"
)

// ErrClosed is the cause of what a closed store's limiters do: their
// decisions go to the FailureMode, and Peek, Reset, Reserve, Charge,
// Refund and a concurrency lease's Release return it, wrapped when they
// add to it, without asking Redis.
var ErrClosed = errors.New("redisstore: store closed")

// ErrUnsent reports, from Close, what the store owed Redis and could not
// send before Close's context ended: charges of requests its twin admitted
// during a fault, and releases of concurrency leases Redis may hold. The
// error says how many keys and leases, never which.
var ErrUnsent = errors.New("redisstore: owed to Redis and not sent")

// Close stops the store and everything it runs in the background, sends
// Redis what the store owes it, and waits for both, until ctx ends.
//
// In order: from the first instant its limiters decide by the FailureMode
// without asking Redis (FailLocal by the twin, owing nothing from then
// on), and the store starts no goroutine; every decision waiting for Redis
// and every call in flight is cut short, as at its deadline. Close then
// stops, and waits for, every goroutine the store started: the flushers
// that send decisions, the settler that sends owed charges, the release
// line of concurrency leases, the denial cache's subscription and its
// PINGs, the eviction watch, under WithLeases the lease worker (first,
// after it gave back the unspent units of every lease, which takes one
// call timeout at most), and the goroutines of single calls on a client
// that does not honour a context's deadline (an Acquire's, a Peek's,
// Reset's, Reserve's, Charge's or Refund's, the breaker's probe). A call
// cut short ends at once on a client that honours a context's deadline
// (ContextTimeoutEnabled), where Peek, Reset, Reserve, Charge and Refund
// run on their caller's goroutine and end by their own deadline; on one
// that does not, go-redis ends it at the client's ReadTimeout or
// WriteTimeout, and a call Close itself sends may end that long after
// ctx.
//
// Once they have all returned, Close itself sends the charges owed
// (asking Redis first about those whose call may have counted them, so
// that each counts once) and the releases of the leases Redis may hold,
// trying again while Redis does not answer, until nothing is owed or ctx
// ends, and takes the store out of the prefix's set of debtors. What is
// still owed then is dropped, and Close returns an error wrapping
// ErrUnsent that says how many keys' charges and how many leases (never
// which keys). If ctx ends before the goroutines return, nothing is sent,
// and the error also wraps ctx's and says how many goroutines still run;
// each ends by itself, at its call's deadline. Give ctx a deadline: with
// Redis down, Close tries until ctx ends.
//
// Close does not close the client, which the caller owns: close it after
// the store. go-redis cannot remove a hook, so the hook New added to the
// client stays, and passes every dial through untouched (dial_hook.go).
// A second Close, and a Close of a store not made by New, returns nil.
func (s *Store) Close(ctx context.Context) error {
	if s == nil || s.guard == nil || !s.guard.closed.CompareAndSwap(false, true) {
		return nil
	}
	if ctx == nil {
		ctx = context.Background() // a caller's slip, not worth a panic
	}
	g := s.guard
	s.leases.stop() // gives leases back first: it calls Redis, within one call timeout
	g.crew.close()
	g.denials.close()
	g.evict.stop()
	g.releases.stop()
	g.dials.stop()
	g.wheel.close()
	g.breakerLog.close()
	running, waitErr := g.crew.wait(ctx)
	var charges, leases int
	if waitErr == nil {
		charges = g.batcher.settleAll(ctx, g.callTimeout())
		leases = g.releases.drain(ctx)
	} else {
		charges = g.batcher.owedKeys()
		leases = g.releases.dropAll()
	}
	g.batcher.close()
	_ = s.local.Close(ctx)
	return closeError(charges, leases, running, waitErr, ctx)
}

// closeError is what Close reports: nil when everything was sent and every
// goroutine returned.
func closeError(charges, leases, running int, waitErr error, ctx context.Context) error {
	var errs []error
	if charges > 0 || leases > 0 {
		err := fmt.Errorf("%w: %d keys' charges and %d concurrency leases", ErrUnsent, charges, leases)
		if cerr := ctx.Err(); cerr != nil {
			err = fmt.Errorf("%w (%w)", err, cerr)
		}
		errs = append(errs, err)
	}
	if waitErr != nil {
		errs = append(errs, fmt.Errorf("redisstore: close: %d of the store's goroutines still running: %w", running, waitErr))
	}
	return errors.Join(errs...)
}

// settleAll sends what the store owes Redis, on Close's goroutine once
// the settler and every flusher have returned: in the settler's rounds
// (settleRound), each bounded by attempt, the doubts of grouped calls are
// asked of Redis and the charges sent, trying again while Redis does not
// answer, until nothing is owed or ctx ends; then it takes the store out
// of the set of debtors. It returns how many keys still owe.
func (b *batcher) settleAll(ctx context.Context, attempt time.Duration) int {
	b.mu.Lock()
	for _, q := range b.queues {
		q.scheduled = false // no flusher runs: a line's charge is the settler's now
	}
	b.mu.Unlock()
	wait := time.Duration(0)
	for pause.For(ctx, wait) == nil {
		b.mu.Lock()
		asks := b.takeGroupDoubtsLocked(settleStreams * settleChunk)
		taken := b.takeIdleChargesLocked(settleStreams * settleChunk)
		owes := len(b.owed) > 0
		b.mu.Unlock()
		if !owes && !b.debtors.listed() {
			break
		}
		// A call that ignores ctx (the client does not honour deadlines)
		// ends at the client's own timeouts.
		actx, cancel := context.WithTimeout(ctx, attempt)
		answered := b.settleRound(actx, owes, asks, taken)
		cancel()
		if answered {
			wait = 0
		} else {
			wait = min(2*max(wait, chargeRetryMin/2), chargeRetryMax)
		}
	}
	return b.owedKeys()
}

// owedKeys returns how many keys owe a charge.
func (b *batcher) owedKeys() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.owed)
}
