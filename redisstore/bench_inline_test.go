package redisstore

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// BenchmarkRedisAllowInline is BenchmarkRedisAllow with the client the
// bench module's comparison uses: calls that honour their context's
// deadline (so an idle key's decision is sent on its caller's goroutine,
// see flushInline) and are never sent again (so they carry no id).
func BenchmarkRedisAllowInline(b *testing.B) {
	addr := redistest.Standalone(b)
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 50, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer c.Close()
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.TokenBucket} {
		for _, par := range []int{1, 25} { // 2 and 50 goroutines on 2 cores
			b.Run(fmt.Sprintf("%s/g=%d", alg, par*runtime.GOMAXPROCS(0)), func(b *testing.B) {
				l, err := algorithms.New(must(New(c)), alg, benchLimit(alg))
				if err != nil {
					b.Fatal(err)
				}
				b.SetParallelism(par)
				if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
					b.Fatal(err)
				}
				runAllowBench(b, l)
				b.ReportMetric(scriptMicros(b, c)/float64(b.N), "redis-µs/op")
			})
		}
	}
}

// selfCPU is the CPU time this process has used, user and system, all
// threads: what a decision costs the application, which ns/op (bounded by
// the round trip) hides.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
