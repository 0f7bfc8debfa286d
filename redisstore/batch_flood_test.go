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
)

// Several stores, each its own client, flood a few keys of a limiter of
// one limit from many goroutines, so that their flushes send the batch
// script with several requests per key, while the proxy in front of Redis
// loses some of the replies (the calls then sent again): with more
// requests than the quota each key admits exactly its quota (no more, and
// no request counted twice); with fewer, every request is admitted and
// Redis counts each exactly once.
func TestAttackBatchFloodManyStores(t *testing.T) {
	counts := &dropCounts{}
	proxyAddr, direct := lossyRedis(t, counts)
	ctx := context.Background()
	const (
		stores     = 3
		goroutines = 12
		perG       = 20 // requests per goroutine: 720 in all, 180 a key
		keys       = 4
		perKey     = stores * goroutines * perG / keys
	)
	for _, tc := range []struct {
		lossy, batchOnly bool
		quota            int
	}{{false, false, 100}, {true, true, 100}, {true, false, 100}, {false, false, 1000}, {true, true, 1000}, {true, false, 1000}} {
		lossy, batchOnly, quota := tc.lossy, tc.batchOnly, tc.quota
		if !wholeMatrix() && (!lossy || batchOnly != (quota == 100)) {
			continue // make test: lossy, both paths, both quotas
		}
		for _, alg := range algorithms.All() {
			t.Run(fmt.Sprintf("lossy=%v/batch-only=%v/quota=%d/%s", lossy, batchOnly, quota, alg), func(t *testing.T) {
				prefix := fmt.Sprintf("abf-%v-%v-%d-%s", lossy, batchOnly, quota, alg)
				limit := algorithms.PerHour(quota)
				ls := make([]algorithms.RateLimiter, stores)
				for i := range ls {
					c := redis.NewClient(&redis.Options{Addr: proxyAddr, PoolSize: 4})
					t.Cleanup(func() { _ = c.Close() })
					s := must(New(c, WithPrefix(prefix), WithTimeout(time.Second), WithMaxInFlight(1), WithDenialCache(0), WithFailureMode(FailClosed)))
					t.Cleanup(func() { _ = s.Close(closeCtx()) })
					l, err := algorithms.New(s, alg, limit)
					if err != nil {
						t.Fatal(err)
					}
					if batchOnly {
						// Every call, one request's too, goes to the batch script.
						l.(*redisLimiter).scriptOne = nil
					}
					ls[i] = l
				}
				probeStore := must(New(direct, WithPrefix(prefix), WithTimeout(5*time.Second)))
				defer probeStore.Close(closeCtx())
				probe, err := algorithms.New(probeStore, alg, limit)
				if err != nil {
					t.Fatal(err)
				}
				rl := ls[0].(*redisLimiter)
				for _, l := range ls {
					// Load the scripts first, so that no lost reply is a NOSCRIPT.
					if _, err := l.Allow(ctx, "warm", 1); err != nil {
						t.Fatal(err)
					}
				}
				var admitted, unknown [keys]atomic.Int32
				var denied atomic.Int32
				droppedBefore := counts.dropped.Load()
				unknownAll := 0
				var stop atomic.Bool
				var wg sync.WaitGroup
				if lossy {
					wg.Go(func() {
						for !stop.Load() {
							counts.arm(1)
							time.Sleep(5 * time.Millisecond)
						}
						counts.arm(0)
					})
				}
				var reqs sync.WaitGroup
				for si, l := range ls {
					for g := range goroutines {
						reqs.Go(func() {
							for i := range perG {
								k := (g + i + si) % keys
								key := fmt.Sprint("k", k)
								res, err := l.Allow(ctx, key, 1)
								switch {
								case err != nil:
									t.Errorf("key %s: %v", key, err)
								case res.Decider == algorithms.DecidedFailClosed && lossy:
									// Every resend lost too: Redis may or may not have counted it.
									unknown[k].Add(1)
								case res.Decider != algorithms.DecidedByStore:
									t.Errorf("key %s: decided by %v", key, res.Decider)
								case res.Allowed:
									admitted[k].Add(1)
								default:
									denied.Add(1)
								}
							}
						})
					}
				}
				reqs.Wait()
				stop.Store(true)
				wg.Wait()
				// The one-request script of every algorithm but the sliding log
				// keeps a call's record in the key's state, which another
				// store's call may replace before a lost reply's call is sent
				// again: that call then counts again, on the strict side
				// (recordsInState). The batch script keeps its reply apart.
				lost := int(counts.dropped.Load() - droppedBefore)
				slack := 0
				if lossy && !batchOnly && recordsInState(alg) {
					slack = lost
				}
				for k := range keys {
					got, unk := int(admitted[k].Load()), int(unknown[k].Load())
					if got > quota {
						t.Errorf("key k%d: %d admitted, quota %d", k, got, quota)
					}
					if want := min(quota, perKey); unk == 0 && (got > want || got < want-slack) {
						t.Errorf("key k%d: %d of %d admitted, all answered by Redis, %d replies lost; want %d", k, got, perKey, lost, want)
					}
					if quota <= perKey {
						continue
					}
					// Below the quota: Redis counted every admitted request once,
					// and at most the unanswered ones besides.
					if u := used(t, probe, fmt.Sprint("k", k)); u < got || u > got+unk+slack {
						t.Errorf("key k%d: Redis counted %d, %d admitted, %d unanswered, %d replies lost", k, u, got, unk, lost)
					}
					unknownAll += unk
				}
				exists, err := direct.ScriptExists(ctx, rl.scriptBatch.Hash()).Result()
				if err != nil || !exists[0] {
					t.Errorf("the batch script never ran: %v %v", exists, err)
				}
				if lossy && lost == 0 {
					t.Error("no reply was lost")
				}
				t.Logf("denied %d, unanswered below quota %d, replies lost %d", denied.Load(), unknownAll, lost)
			})
		}
	}
}
