package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A single call is one script call outside the batches: Peek's, Reset's,
// Reserve's, Charge's, Refund's. call takes one through
// the breaker, the store's deadline and the observer; within, through the
// deadline alone. What a failure then decides (the failure mode, an error)
// is the operation's.

// call runs f, one single call, through the breaker, within the store's
// deadline (within), and tells the breaker and the observer how it went:
// an open breaker, or a closed store, runs nothing and returns
// errBreakerOpen or ErrClosed; a call Redis answered, with an error reply
// too, is a success for the breaker; a caller's cancelation says nothing
// of Redis. It returns f's error, or within's
// (TestSingleCallsHonourTheBreaker).
func (g *guard) call(ctx context.Context, f func(context.Context) error) error {
	sent := g.clock()
	probe, err := g.admit(sent)
	if err != nil {
		return err
	}
	err = g.within(ctx, f)
	if err != nil && ctx != nil && errors.Is(ctx.Err(), context.Canceled) {
		g.unsent(probe)
		return err
	}
	g.heard(err, sent, probe)
	return err
}

// admit asks the breaker whether a single call may go at now: ErrClosed
// after Close, errBreakerOpen while the breaker is open; probe says the
// call is the breaker's probe, which the caller ends with heard, or with
// unsent when the call never went (or its caller left, which says nothing
// of Redis). Every single call, a concurrency Acquire's too, goes through
// admit and heard: the one place they meet the breaker and the observer.
func (g *guard) admit(now time.Time) (probe bool, err error) {
	if g.closed.Load() {
		return false, ErrClosed
	}
	ok, probe := g.breaker.Allow(now)
	if !ok {
		return false, errBreakerOpen
	}
	return probe, nil
}

// heard tells the breaker and the observer how a call sent at sent ended:
// a call Redis answered, with an error reply too, is a success for the
// breaker; a failure reloads the Cluster's slots and reaches the observer.
func (g *guard) heard(err error, sent time.Time, probe bool) {
	g.breaker.Record(g.clock(), err == nil || classify(err) == ErrorScript, probe)
	if err != nil {
		g.reloadSlots()
		g.reportError(err, sent)
	}
}

// unsent gives back a probe admit gave for a call that was not sent.
func (g *guard) unsent(probe bool) {
	if probe {
		g.breaker.CancelProbe()
	}
}

// within runs f with a deadline of the store's timeout (or ctx's, if
// sooner). On a client that honours a context's deadline (inline) it runs
// f on the caller's goroutine, which f returns to by that deadline; on
// another it runs f on a goroutine of the store's crew, returning when the
// deadline passes even if f would wait longer (f then goes on in the
// background, its context canceled, until the client gives up at its own
// timeouts). A closed store runs nothing and returns ErrClosed. Single
// calls reach Redis through call, which runs them through within, and a
// concurrency lease's release through within alone (TestWithinSpawnsOnlyWhenNeeded).
func (g *guard) within(ctx context.Context, f func(context.Context) error) error {
	if ctx == nil {
		ctx = context.Background() // a caller's slip, not worth a panic
	}
	if g.closed.Load() {
		return ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	if g.inline {
		return f(ctx)
	}
	done := make(chan error, 1)
	if !g.crew.spawn(func() { done <- f(ctx) }) {
		return ErrClosed
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("redisstore: %w", context.Cause(ctx))
	}
}
