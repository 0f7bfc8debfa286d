package redistest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TryAgains counts the TRYAGAIN replies a Cluster client's nodes give: a
// node of a migrating slot gives one to a call of several of the slot's
// keys when only some of them are there. A test of a migrating slot reads
// it to prove that the calls after the first are sent as Redis can serve
// them at once.
type TryAgains struct{ n atomic.Int64 }

// TryAgainClient is a Cluster client of addrs whose nodes' TRYAGAIN
// replies are counted; it is closed when the test ends.
func TryAgainClient(t testing.TB, addrs []string) (*redis.ClusterClient, *TryAgains) {
	h := &TryAgains{}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	c.OnNewNode(func(n *redis.Client) { n.AddHook(h) })
	t.Cleanup(func() { _ = c.Close() })
	return c, h
}

// Count is how many TRYAGAIN replies came since the client was made or
// Reset.
func (h *TryAgains) Count() int64 { return h.n.Load() }

// Reset starts the count again from 0.
func (h *TryAgains) Reset() { h.n.Store(0) }

// DialHook implements redis.Hook, passing dials through.
func (h *TryAgains) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook, counting a command's TRYAGAIN.
func (h *TryAgains) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.count(cmd)
		return err
	}
}

// ProcessPipelineHook implements redis.Hook, counting each command's
// TRYAGAIN.
func (h *TryAgains) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return err
	}
}

func (h *TryAgains) count(cmd redis.Cmder) {
	if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "TRYAGAIN") {
		h.n.Add(1)
	}
}
