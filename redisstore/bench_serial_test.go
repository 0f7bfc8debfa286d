package redisstore

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// BenchmarkRedisAllowSerial is one request at a time against one real
// Redis server: each decision is a script call of its own, so redis-µs/op
// (the scripts' time in Redis, from INFO commandstats) is what one
// decision costs Redis when nothing shares its call.
func BenchmarkRedisAllowSerial(b *testing.B) {
	addr := redistest.Standalone(b)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	for _, alg := range algorithms.All() {
		b.Run(string(alg), func(b *testing.B) {
			l, err := algorithms.New(must(New(c)), alg, benchLimit(alg))
			if err != nil {
				b.Fatal(err)
			}
			if err := c.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0 := selfCPU(b)
			for i := 0; b.Loop(); i++ {
				r, err := l.Allow(ctx, benchKeys[i&(len(benchKeys)-1)], 1)
				if err != nil || !r.Allowed {
					b.Fatalf("Allow: %+v, %v", r, err)
				}
			}
			b.ReportMetric(float64((selfCPU(b)-cpu0).Microseconds())/float64(b.N), "app-µs/op")
			b.ReportMetric(scriptMicros(b, c)/float64(b.N), "redis-µs/op")
		})
	}
}
