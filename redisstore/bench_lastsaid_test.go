package redisstore

import (
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// BenchmarkLastSaidCost measures what remembering Redis's last answer per
// key (see lastSaid) costs this process per decision over Redis: the same
// load with the table and without it, side by side, as the process's CPU
// time per decision (app-µs/op; the server's is its own process).
func BenchmarkLastSaidCost(b *testing.B) {
	addr := redistest.Standalone(b)
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	defer c.Close()
	for _, on := range []bool{true, false} {
		name := "without"
		if on {
			name = "with"
		}
		b.Run(name, func(b *testing.B) {
			rl, err := algorithms.New(must(New(c)), algorithms.FixedWindow, benchLimit(algorithms.FixedWindow))
			if err != nil {
				b.Fatal(err)
			}
			if !on {
				rl.(*redisLimiter).guard.said = nil
			}
			b.SetParallelism(25)
			before := cpuTime()
			runAllowBench(b, rl)
			b.ReportMetric(float64((cpuTime()-before).Nanoseconds())/1e3/float64(b.N), "app-µs/op")
		})
	}
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
