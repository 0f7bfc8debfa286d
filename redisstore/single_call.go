package redisstore

import (
	"context"
	"errors"
	"fmt"
)

// A single call is one script call outside the batches: Peek's, Reset's,
// Reserve's, Charge's, Refund's, a lease's grant. call takes one through
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
	if g.closed.Load() {
		return ErrClosed
	}
	sent := g.clock()
	ok, probe := g.breaker.Allow(sent)
	if !ok {
		return errBreakerOpen
	}
	err := g.within(ctx, f)
	if err != nil && ctx != nil && errors.Is(ctx.Err(), context.Canceled) {
		if probe {
			g.breaker.CancelProbe()
		}
		return err
	}
	g.breaker.Record(g.clock(), err == nil || classify(err) == ErrorScript, probe)
	if err != nil {
		g.reloadSlots()
		g.reportError(err, sent)
	}
	return err
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
