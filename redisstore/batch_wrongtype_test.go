package redisstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// A key whose state holds a value of the wrong type, flooded in the same
// flushes as good keys (batch-script calls of several keys), fails alone:
// none of its requests passes, its value is left as it was, and every good
// key is still decided by Redis and admits exactly its quota.
func TestAttackBatchWrongTypeKeyFailsAlone(t *testing.T) {
	addr := redistest.Standalone(t)
	direct := redis.NewClient(&redis.Options{Addr: addr})
	defer direct.Close()
	ctx := context.Background()
	const (
		quota, keys, goroutines, perG = 50, 4, 16, 20 // 320 requests, 64 a key
	)
	for _, mode := range []FailureMode{FailClosed, FailLocal} {
		for _, alg := range algorithms.All() {
			t.Run(fmt.Sprintf("%v/%s", mode, alg), func(t *testing.T) {
				c := redis.NewClient(&redis.Options{Addr: addr})
				defer c.Close()
				s := must(New(c, WithPrefix(fmt.Sprintf("abw-%v-%s", mode, alg)), WithTimeout(2*time.Second),
					WithMaxInFlight(1), WithDenialCache(0), WithFailureMode(mode)))
				defer s.Close(closeSoon()) // the bad key's charges never land
				l, err := algorithms.New(s, alg, algorithms.PerHour(quota))
				if err != nil {
					t.Fatal(err)
				}
				state := make([]string, 1)
				l.(*redisLimiter).keysOf("bad", state, 0)
				direct.RPush(ctx, state[0], "x")
				direct.Expire(ctx, state[0], time.Hour)
				var admitted [keys + 1]atomic.Int32
				var badFailed atomic.Int32
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Go(func() {
						for i := range perG {
							k := (g + i) % (keys + 1)
							key := fmt.Sprint("k", k)
							if k == keys {
								key = "bad"
							}
							res, err := l.Allow(ctx, key, 1)
							switch {
							case k == keys && (err != nil || res.Decider != algorithms.DecidedByStore):
								badFailed.Add(1)
								if res.Allowed && mode == FailClosed {
									t.Errorf("bad key allowed: %+v", res)
								}
							case k == keys:
								t.Errorf("bad key decided by Redis: %+v", res)
							case err != nil || res.Decider != algorithms.DecidedByStore:
								t.Errorf("key %s: %+v, %v; want decided by Redis", key, res, err)
							case res.Allowed:
								admitted[k].Add(1)
							}
						}
					})
				}
				wg.Wait()
				for k := range keys {
					if got := admitted[k].Load(); got != quota {
						t.Errorf("key k%d: %d admitted, want %d", k, got, quota)
					}
				}
				if got := direct.LRange(ctx, state[0], 0, -1).Val(); len(got) != 1 || got[0] != "x" {
					t.Errorf("bad key's list is now %q", got)
				}
				if badFailed.Load() == 0 {
					t.Error("no request on the bad key")
				}
			})
		}
	}
}
