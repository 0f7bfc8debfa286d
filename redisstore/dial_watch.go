package redisstore

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// dialWatch is a store's ear on its client's dials, which New always
// starts (through the client's one dialHook, dial_hook.go) and Close
// stops: go-redis dials on a goroutine of its own, retries a refused
// dial (5 times, 100 ms apart, by default) and then the command, until the
// call's deadline, and reports only the deadline.
//
// Invariant: a dial that Redis refused (see refusedDial) is heard at once,
// whoever made it: the breaker opens (guard.refused, or counts as the
// probe's failure), and every decision waiting for Redis and every call of
// the store stops waiting (deadlineWheel.expireAll): each goes the way it
// would at its deadline, decided by the failure mode, its charge owed as
// the charge line says (see owed_charges.go); a call cut short may have
// run (an earlier attempt of it may have), and is taken for one that may
// have. While the latest dial failed, a probe holds no request
// (probeAside). A stopped Redis so costs a decision well under a
// millisecond from the first request on, not the deadline: proved by
// TestRefusedDecidesAtOnce (a killed server, a port nobody listens on, the
// inline path, the caller's deadline, a pool go-redis stopped dialing),
// TestRefusalEndsEveryWait (decisions queued behind the refused call) and
// TestRefusedAcquireAtOnce; the charges by TestLocalAdmissionsAreCharged.
// The observer is told the truth too: a call that ended after a refused
// dial is a connection failure, not the timeout (or the cancelation) it
// ends with (see kindOf).
type dialWatch struct {
	clock func() time.Time
	// refusedAt is when the latest dial failed to connect (refused, reset,
	// unreachable), in Unix nanoseconds; 0 once a later dial succeeded.
	refusedAt atomic.Int64
	// refused is told of each dial that Redis refused.
	refused func()
	// hook is the client's hook that tells this watch of its dials.
	hook *dialHook
}

// watchDials starts a dialWatch of client's dials: a Client's, or, on a
// ClusterClient, those of the node clients it makes from now on. Other
// clients are not watched (nil). stop ends the watch.
func watchDials(client redis.UniversalClient, clock func() time.Time, refused func()) *dialWatch {
	h := hookOf(client)
	if h == nil {
		return nil
	}
	w := &dialWatch{clock: clock, refused: refused, hook: h}
	h.add(w)
	return w
}

// stop ends the watch: the client's dials reach it no more.
func (w *dialWatch) stop() {
	if w != nil {
		w.hook.remove(w)
	}
}

// heard records a dial's outcome; a dial that ended otherwise (a timeout,
// a cancelled context) says nothing new about the server.
func (w *dialWatch) heard(err error) {
	switch {
	case err == nil:
		w.refusedAt.Store(0)
	case classify(err) == ErrorConnection:
		w.refusedAt.Store(max(1, w.clock().UnixNano()))
		if refusedDial(err) {
			w.refused()
		}
	}
}

// refusedDial reports whether a failed dial's error is an answer that no
// server listens there: refused, reset while connecting, no route to the
// host or its network, or no Unix socket. A dial that timed out is not
// one: a server that is only slow to accept looks the same.
func refusedDial(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.Is(err, syscall.ENOENT)
}

// refused is the store's answer to a dial that Redis refused (see
// dialWatch): the breaker opens, and every wait ends now.
func (g *guard) refused() {
	g.breaker.Trip(g.clock(), "Redis refused the connection")
	g.wheel.expireAll()
}

// refusing reports whether the client's latest dial failed to connect.
func (g *guard) refusing() bool {
	return g.dials != nil && g.dials.refusedAt.Load() != 0
}

// probeAside probes Redis for the breaker with a peek at key, which counts
// nothing, on a goroutine of its own: while Redis refuses connections a
// probe holds no request, which the failure mode decides at once. (After
// many refused dials go-redis stops dialing and answers a call with the
// last dial's error only after its own retries, with no dial for the watch
// to hear: a request that probed would wait for them, up to its deadline.)
func (l *redisLimiter) probeAside(key string) {
	g := l.guard
	g.crew.spawn(func() {
		sent := g.clock()
		_, _, err := l.run(g.wheel.contextFor(g.callTimeout()), key, "p1", false)
		g.heard(err, sent, true)
	})
}

// kindOf classifies err, the failure of a call sent at sent: a deadline
// that passed, or a call that expireAll ended, while the client's dials
// were refused (the latest dial since sent was) is a connection failure.
func (g *guard) kindOf(err error, sent time.Time) ErrorKind {
	k := classify(err)
	if (k == ErrorTimeout || errors.Is(err, context.Canceled)) && g.refusedSince(sent) {
		return ErrorConnection
	}
	return k
}

// refusedSince reports whether the client's latest dial, made since at,
// failed to connect.
func (g *guard) refusedSince(at time.Time) bool {
	if g.dials == nil {
		return false
	}
	r := g.dials.refusedAt.Load()
	return r != 0 && r >= at.UnixNano()
}

// reportError tells the observer, if any, of a failed call sent at sent.
func (g *guard) reportError(err error, sent time.Time) {
	if g.observer != nil {
		g.observer.StoreError(g.kindOf(err, sent))
	}
}
