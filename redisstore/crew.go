package redisstore

import (
	"context"
	"sync"
)

// crew counts the goroutines a store starts, so that Close can stop
// starting them and wait for every one: the flushers (batcher.go), the
// settler (settler.go), the release line (concurrency_releases.go), the
// denial cache's subscription (denials_sync.go), the eviction watch
// (eviction_watch.go), and the goroutines of single calls (an Acquire's
// call, a call bounded by within, the breaker's probe aside).
//
// Invariant: after close no goroutine starts (spawn reports false), and
// the channel close returns is closed once every goroutine spawned has
// returned. A nil *crew (a mechanism made without a store, in tests)
// starts goroutines and counts none.
type crew struct {
	mu      sync.Mutex
	running int
	spawned uint64 // goroutines started, ever
	closed  bool
	stop    chan struct{} // closed by close: long waits end at once
	idle    chan struct{} // closed once closed and none runs
}

func newCrew() *crew {
	return &crew{stop: make(chan struct{}), idle: make(chan struct{})}
}

// spawn runs f on a goroutine of the crew, and reports false, running
// nothing, once the crew is closed.
func (c *crew) spawn(f func()) bool {
	if c == nil {
		go f()
		return true
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.running++
	c.spawned++
	c.mu.Unlock()
	go func() {
		defer c.exit()
		f()
	}()
	return true
}

// exit counts a goroutine out.
func (c *crew) exit() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running--
	if c.closed && c.running == 0 {
		close(c.idle)
	}
}

// stopping returns a channel closed by close; nil (never closed) for a nil
// crew.
func (c *crew) stopping() <-chan struct{} {
	if c == nil {
		return nil
	}
	return c.stop
}

// close stops the crew from starting goroutines and tells those that wait
// (stopping); it is safe to call more than once.
func (c *crew) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	close(c.stop)
	if c.running == 0 {
		close(c.idle)
	}
}

// wait waits, after close, until every goroutine has returned or ctx ends;
// it returns how many still run then, with ctx's error.
func (c *crew) wait(ctx context.Context) (int, error) {
	select {
	case <-c.idle:
		return 0, nil
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running == 0 {
		return 0, nil
	}
	return c.running, ctx.Err()
}
