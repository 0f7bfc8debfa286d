package redisstore

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// benchLimitsRuns numbers BenchmarkLeasedLimits's runs.
var benchLimitsRuns atomic.Int64

// BenchmarkLeasedLimits decides requests of 256 hot keys, never denied,
// from parallel goroutines, on a limiter of two limits: on a store with
// WithLeases(time.Second), where they decide from every limit's leases in
// memory, and on the exact store, on the same Redis in the same run; the
// keys warmed first (two requests each, leases awaited), so that it
// times busy keys only.
func BenchmarkLeasedLimits(b *testing.B) {
	addr := redistest.Standalone(b)
	var keys [256]string
	for i := range keys {
		keys[i] = "hot-" + keyName(i)
	}
	for _, alg := range leaseWindows {
		limits := twoLimits(alg, 100_000) // rate × period within 2^53 µs: unit 1, leased
		for _, leased := range []bool{true, false} {
			name := string(alg) + "/exact"
			opts := []Option{WithEvictionAllowed(), WithLogger(quietLogger()), WithTimeout(5 * time.Second)}
			if leased {
				name = string(alg) + "/leased"
				opts = append(opts, WithLeases(time.Second))
			}
			b.Run(name, func(b *testing.B) {
				c := redis.NewClient(&redis.Options{Addr: addr})
				defer func() { _ = c.Close() }()
				// A prefix of its own each time, so that no key is denied.
				prefix := "benchl-" + name + "-" + keyName(int(benchLimitsRuns.Add(1)))
				s := must(New(c, append(opts, WithPrefix(prefix))...))
				defer func() { _ = s.Close(closeCtx()) }()
				l, err := algorithms.New(s, alg, limits...)
				if err != nil {
					b.Fatal(err)
				}
				warmLimits(b, l, keys[:])
				var next atomic.Uint32
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					ctx := context.Background()
					i := next.Add(1)
					for pb.Next() {
						i++
						if res, err := l.Allow(ctx, keys[i%uint32(len(keys))], 1); err != nil || !res.Allowed {
							b.Errorf("%+v %v", res, err)
							return
						}
					}
				})
			})
		}
	}
}

// warmLimits sends two requests of each key to l and, when it is leased,
// waits until every limit of every key holds a lease.
func warmLimits(b *testing.B, l algorithms.Limiter, keys []string) {
	b.Helper()
	for _, key := range keys {
		for range 2 {
			if res, err := l.Allow(context.Background(), key, 1); err != nil || !res.Allowed {
				b.Fatalf("warming %s: %+v %v", key, res, err)
			}
		}
	}
	ll, ok := l.(*leasedLimits)
	if !ok {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, key := range keys {
		for slices.Contains(limitsUnits(ll, key), 0) {
			if time.Now().After(deadline) {
				b.Fatalf("%s: no lease of every limit after warming", key)
			}
			time.Sleep(time.Millisecond)
		}
	}
}
