package redisstore

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// ErrorKind classifies a failed script call, for metrics.
type ErrorKind string

// The kinds of failed script calls.
const (
	// ErrorTimeout: no answer in time.
	ErrorTimeout ErrorKind = "timeout"
	// ErrorConnection: the connection could not be made or broke, or the
	// call ended (at its deadline, or cut short by a refused dial) while
	// the client's dials were refused (a stopped Redis, which go-redis's
	// dial retries would report as a timeout).
	ErrorConnection ErrorKind = "connection"
	// ErrorScript: Redis answered with an error (OOM, a script error), or
	// with a reply the store cannot read.
	ErrorScript ErrorKind = "script"
	// ErrorOther: anything else.
	ErrorOther ErrorKind = "other"
)

// Observer receives a Redis store's events, for metrics. Its methods are
// called on the decision path and must be fast and safe for concurrent
// use. Package metrics implements it with Prometheus.
type Observer interface {
	// StoreError reports a failed call made for a request: a decision,
	// a reservation, a peek, a charge or refund, a concurrency lease. The
	// store's own calls after a fault (sending what it owes, reading the
	// replies Redis kept) try again until Redis answers and are not
	// reported; a refused dial of theirs opens the breaker all the same.
	StoreError(kind ErrorKind)
	// BreakerChanged reports the store's breaker opening (open true) or
	// closing; store is the store's key prefix (WithPrefix).
	BreakerChanged(store string, open bool)
}

// WithObserver sets an Observer of a Redis store's failed calls and
// breaker; nil (the default) observes nothing, and a nil pointer in an
// Observer is refused. Decisions themselves are observed by the middleware
// (middleware.WithObserver). The memory store ignores it. The hook New adds
// to the client's dials tells a stopped Redis (a connection failure) from a
// slow one (a timeout).
func WithObserver(o Observer) Option {
	return func(c *config) {
		if o != nil && isNilValue(o) {
			c.invalid("nil %T observer", o)
			return
		}
		c.redis.observer = o
	}
}

// classify returns the kind of a failed call's error.
func classify(err error) ErrorKind {
	var netErr net.Error
	var redisErr redis.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return ErrorTimeout
	case errors.Is(err, ErrUnexpectedReply), errors.As(err, &redisErr):
		return ErrorScript
	case errors.As(err, &netErr), errors.Is(err, redis.ErrClosed), isConnectionError(err):
		return ErrorConnection
	}
	return ErrorOther
}

// isConnectionError reports the errors of a connection that broke or was
// never made: the server closed it (EOF), reset it or refused it.
func isConnectionError(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}
