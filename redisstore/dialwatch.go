package redisstore

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// dialWatch is a go-redis hook that remembers whether the client's latest
// dial was refused, so that the observer is told the truth about a stopped
// Redis: go-redis retries a refused dial (and then the command) until the
// call's deadline, and reports only the deadline, which classify alone
// would count as a timeout.
type dialWatch struct {
	clock func() time.Time
	// refusedAt is when the latest dial failed to connect (refused, reset,
	// unreachable), in Unix nanoseconds; 0 once a later dial succeeded.
	refusedAt atomic.Int64
}

// watchDials hooks a dialWatch into client's dials: a Client's, or, on a
// ClusterClient, those of the node clients it makes from now on. Other
// clients are not watched (nil).
func watchDials(client redis.UniversalClient, clock func() time.Time) *dialWatch {
	w := &dialWatch{clock: clock}
	switch c := client.(type) {
	case *redis.Client:
		c.AddHook(w)
	case *redis.ClusterClient:
		c.OnNewNode(func(node *redis.Client) { node.AddHook(w) })
	default:
		return nil
	}
	return w
}

// DialHook records each dial's outcome; a dial that ended otherwise (a
// timeout, a cancelled context) says nothing new about the server.
func (w *dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		switch {
		case err == nil:
			w.refusedAt.Store(0)
		case classify(err) == ErrorConnection:
			w.refusedAt.Store(max(1, w.clock().UnixNano()))
		}
		return conn, err
	}
}

// ProcessHook leaves commands alone.
func (w *dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook leaves pipelines alone.
func (w *dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// kindOf classifies err, the failure of a call sent at sent: a deadline
// that passed while the client's dials were refused (the latest dial since
// sent was) is a connection failure.
func (g *guard) kindOf(err error, sent time.Time) ErrorKind {
	k := classify(err)
	if k == ErrorTimeout && g.dials != nil {
		if at := g.dials.refusedAt.Load(); at != 0 && at >= sent.UnixNano() {
			return ErrorConnection
		}
	}
	return k
}

// reportError tells the observer, if any, of a failed call sent at sent.
func (g *guard) reportError(err error, sent time.Time) {
	if g.observer != nil {
		g.observer.StoreError(g.kindOf(err, sent))
	}
}
