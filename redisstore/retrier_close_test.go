package redisstore

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

func owedLen(b *batcher) (owed, gates int, retrying bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.owed), len(b.gates), b.retrying
}

// A charge that can never be counted (Redis gone, the store and its client
// closed) does not keep the charge retrier alive: Close stops it.
func TestRetrierStopsOnClose(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	st := must(New(c, WithLogger(quietLogger()), WithTimeout(50*time.Millisecond)))
	l, err := algorithms.New(st, algorithms.FixedWindow, algorithms.PerMinute(10))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Allow(ctx, "warm", 1); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	srv.Kill()
	for range 5 {
		_, _ = l.Allow(ctx, "k", 1)
	}
	_ = st.Close(closeCtx())
	_ = c.Close()
	time.Sleep(3 * time.Second)
	owed, gates, retrying := owedLen(st.guard.batcher)
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	t.Logf("after Close and client.Close, 3s later: owed=%d gates=%d retrying=%v goroutines %d -> %d, retryCharges goroutines %d",
		owed, gates, retrying, before, runtime.NumGoroutine(), strings.Count(stacks, "retryCharges"))
	if retrying {
		t.Errorf("the charge retrier still runs after the store and its client were closed")
	}
}
