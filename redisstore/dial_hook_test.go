package redisstore

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
)

// hookWatches is how many stores' watches c's dialHook tells.
func hookWatches(c redis.UniversalClient) int {
	h := hookOf(c)
	if ws := h.watches.Load(); ws != nil {
		return len(*ws)
	}
	return 0
}

// Stores made and closed on one client install one hook between them,
// and a closed store hears its client's dials no more: a refused dial
// opens only the breakers of the stores still open.
func TestOneDialHookPerClient(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer c.Close()
	first := hookOf(c)
	var open []*Store
	for i := range 50 {
		st := must(New(c, WithLogger(quietLogger())))
		if i%2 == 0 {
			_ = st.Close(closeCtx())
		} else {
			open = append(open, st)
		}
		if h := hookOf(c); h != first {
			t.Fatalf("store %d: a second hook on the client", i)
		}
	}
	if got := hookWatches(c); got != len(open) {
		t.Fatalf("the hook tells %d watches, want the %d open stores'", got, len(open))
	}
	closed := must(New(c, WithLogger(quietLogger())))
	_ = closed.Close(closeCtx())
	srv.Stop()
	// A command on a pooled connection meets the closed connection; the
	// next one dials, and is refused.
	for range 10 {
		if open[0].guard.refusing() {
			break
		}
		_ = c.Ping(context.Background()).Err()
	}
	for i, st := range open {
		if !st.guard.refusing() {
			t.Errorf("open store %d did not hear the refused dial", i)
		}
	}
	if closed.guard.refusing() {
		t.Error("a closed store heard the client's dial")
	}
	for _, st := range open {
		_ = st.Close(closeCtx())
	}
	if got := hookWatches(c); got != 0 {
		t.Errorf("after every Close the hook tells %d watches", got)
	}
}
