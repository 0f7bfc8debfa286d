package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// When Redis stops answering, the twin starts a key from this instance's
// share of what Redis last said was left: 10 a minute over 2 instances,
// 6 spent through Redis, so 2 (of the 4 left) locally; a key Redis never
// answered for starts from a full share, 5. For every algorithm.
func TestLocalStartsFromRedis(t *testing.T) {
	for _, alg := range algorithms.Algorithms {
		t.Run(string(alg), func(t *testing.T) {
			srv := redistest.StartServer(t)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
			t.Cleanup(func() { _ = c.Close() })
			l, err := algorithms.New(New(c, WithInstances(2), WithTimeout(50*time.Millisecond), WithLogger(quietLogger())), alg, algorithms.PerMinute(10))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i := range 6 {
				if res, err := l.Allow(ctx, "used", 1); err != nil || !res.Allowed || res.Decider != algorithms.DecidedByStore {
					t.Fatalf("request %d through Redis: %+v %v", i, res, err)
				}
			}
			srv.Stop()
			admitted := func(key string) int {
				n := 0
				for range 8 {
					res, err := l.Allow(ctx, key, 1)
					if err != nil || res.Decider != algorithms.DecidedLocally {
						t.Fatalf("%s: %+v %v; want a local decision", key, res, err)
					}
					if res.Allowed {
						n++
					}
				}
				return n
			}
			if n := admitted("used"); n != 2 {
				t.Errorf("a key Redis said had 4 left: %d admitted locally, want 2 (this instance's share)", n)
			}
			if n := admitted("fresh"); n != 5 {
				t.Errorf("a key Redis never answered for: %d admitted locally, want 5 (a full share)", n)
			}
		})
	}
}
