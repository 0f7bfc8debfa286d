package redisstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// BenchmarkLeased decides requests of 16 hot keys, never denied, from
// parallel goroutines: on a store with WithLeases(time.Second), where they
// decide from leases in memory, and on the exact store, on the same Redis
// in the same run.
func BenchmarkLeased(b *testing.B) {
	addr := redistest.Standalone(b)
	lim := algorithms.Limit{Rate: 1_000_000, Period: time.Hour} // rate × period within 2^53 µs: unit 1, leased
	var keys [16]string
	for i := range keys {
		keys[i] = "hot-" + keyName(i)
	}
	for _, alg := range leaseWindows {
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
				s := must(New(c, append(opts, WithPrefix("bench-"+name))...))
				defer func() { _ = s.Close(closeCtx()) }()
				l, err := algorithms.New(s, alg, lim)
				if err != nil {
					b.Fatal(err)
				}
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
