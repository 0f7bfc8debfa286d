package redisstore

import (
	"context"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/redis/go-redis/v9"
)

// dialHook is the one go-redis hook redlimit installs on a client, however
// many stores share the client: it tells each store's dialWatch of every
// dial the client makes.
//
// Invariant: a client carries at most one dialHook, installed by the first
// store made on it (on a ClusterClient, on each node client it makes from
// then on) and found again by every later one (dialHooks, keyed by a weak
// pointer, so that the table never keeps a client alive: its entry goes
// when the client is collected). A store's Close takes its watch out
// (dialWatch.stop); go-redis cannot remove a hook, so one whose stores
// have all closed stays installed and passes every dial through untouched.
// Stores made and closed on one client, any number of them, so cost its
// dials one hook, not one each. Proved by TestOneDialHookPerClient.
type dialHook struct {
	mu      sync.Mutex
	watches atomic.Pointer[[]*dialWatch] // replaced, never changed in place
}

// dialHooks finds a client's dialHook.
var dialHooks = struct {
	sync.Mutex
	of map[any]*dialHook // weak.Pointer of a *redis.Client or *redis.ClusterClient
}{of: map[any]*dialHook{}}

// hookOf returns client's dialHook, installing it on first use; nil for a
// client that is neither a *redis.Client nor a *redis.ClusterClient.
func hookOf(client redis.UniversalClient) *dialHook {
	switch c := client.(type) {
	case *redis.Client:
		return hookOnce(c, func(h *dialHook) { c.AddHook(h) })
	case *redis.ClusterClient:
		return hookOnce(c, func(h *dialHook) { c.OnNewNode(func(node *redis.Client) { node.AddHook(h) }) })
	}
	return nil
}

// hookOnce returns c's dialHook, installing a new one with install unless
// c has one.
func hookOnce[C any](c *C, install func(*dialHook)) *dialHook {
	key := weak.Make(c)
	dialHooks.Lock()
	defer dialHooks.Unlock()
	if h := dialHooks.of[key]; h != nil {
		return h
	}
	h := new(dialHook)
	install(h)
	dialHooks.of[key] = h
	runtime.AddCleanup(c, func(key weak.Pointer[C]) {
		dialHooks.Lock()
		defer dialHooks.Unlock()
		delete(dialHooks.of, key)
	}, key)
	return h
}

// add makes w hear the client's dials.
func (h *dialHook) add(w *dialWatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ws []*dialWatch
	if old := h.watches.Load(); old != nil {
		ws = slices.Clone(*old)
	}
	ws = append(ws, w)
	h.watches.Store(&ws)
}

// remove stops w hearing the client's dials.
func (h *dialHook) remove(w *dialWatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.watches.Load()
	if old == nil {
		return
	}
	ws := slices.DeleteFunc(slices.Clone(*old), func(x *dialWatch) bool { return x == w })
	h.watches.Store(&ws)
}

// DialHook tells every watch of each dial's outcome.
func (h *dialHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if ws := h.watches.Load(); ws != nil {
			for _, w := range *ws {
				w.heard(err)
			}
		}
		return conn, err
	}
}

// ProcessHook leaves commands alone.
func (h *dialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook leaves pipelines alone.
func (h *dialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
