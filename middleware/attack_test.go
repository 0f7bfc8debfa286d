package middleware

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// With Redis hung, a request whose own context ends before the store's
// timeout is answered by then, on either client: the middleware hands the
// request's context to the store's limiter, which must keep its deadline.
func TestAttackHungRedisKeepsRequestDeadline(t *testing.T) {
	const storeTimeout, requestTimeout = 400 * time.Millisecond, 30 * time.Millisecond
	for _, inline := range []bool{false, true} {
		t.Run(map[bool]string{false: "default client", true: "deadline-honouring client"}[inline], func(t *testing.T) {
			srv := redistest.StartServer(t)
			client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: inline})
			t.Cleanup(func() { _ = client.Close() })
			store := must(redisstore.New(client, redisstore.WithTimeout(storeTimeout), redisstore.WithDenialCache(0)))
			h := mustNew(t, newLimiter(t, store, algorithms.TokenBucket, algorithms.PerMinute(100)))(&okHandler{})
			if rec := from(h, "/", "203.0.113.7:1"); rec.Code != http.StatusOK {
				t.Fatalf("with Redis up: %d", rec.Code)
			}
			srv.Freeze()
			defer srv.Thaw()
			for i := range 4 {
				ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
				r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
				r.RemoteAddr = "203.0.113.7:1"
				rec := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(rec, r)
				took := time.Since(start)
				cancel()
				if took > requestTimeout+100*time.Millisecond {
					t.Errorf("request %d answered after %s; its deadline was %s", i, took, requestTimeout)
				}
				if rec.Code != http.StatusOK {
					t.Errorf("request %d: status %d, want the local decision's 200", i, rec.Code)
				}
			}
		})
	}
}
