package redisstore

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
)

// dropCounts is what one or more dropProxies share: how many script calls'
// replies are still to be lost, and what happened.
type dropCounts struct {
	armed atomic.Int32 // replies of script calls still to drop
	// pipelined restricts the drops to script calls sent in one write
	// with more commands after them: a pipeline.
	pipelined atomic.Bool
	// hold keeps a dropped call's connection open this long after Redis
	// answered, so that the client gives up on a timeout rather than on a
	// closed connection.
	hold    atomic.Int64
	scripts atomic.Int32 // script calls forwarded to Redis
	dropped atomic.Int32 // script calls whose reply was dropped
}

// arm makes the next n script calls lose their reply.
func (d *dropCounts) arm(n int32) { d.armed.Store(n) }

// Drop implements redistest.DropRule.
func (d *dropCounts) Drop(pipelined bool) bool {
	d.scripts.Add(1)
	return (!d.pipelined.Load() || pipelined) && redistest.Take(&d.armed)
}

// Dropped implements redistest.DropRule.
func (d *dropCounts) Dropped() { d.dropped.Add(1) }

// Hold implements redistest.DropRule.
func (d *dropCounts) Hold() time.Duration { return time.Duration(d.hold.Load()) }

// dropProxy is a redistest.DropProxy in front of a Redis server, losing
// the replies counts picks.
type dropProxy struct{ addr string }

// lossyRedis starts a Redis server behind a dropProxy that drops replies
// as counts says, and returns the proxy's address and a client of the
// server itself, closed when the test ends.
func lossyRedis(t testing.TB, counts *dropCounts) (proxyAddr string, direct *redis.Client) {
	t.Helper()
	addr := redistest.Standalone(t)
	direct = redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = direct.Close() })
	return newDropProxy(t, addr, counts).addr, direct
}

// newDropProxy starts a proxy in front of target that drops replies as
// counts says; it stops when the test ends.
func newDropProxy(t testing.TB, target string, counts *dropCounts) *dropProxy {
	t.Helper()
	return &dropProxy{addr: redistest.NewDropProxy(t, target, counts).Addr}
}
