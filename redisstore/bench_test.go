package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memstore"
)

// benchKeys are the identities the benchmarks spread requests over.
var benchKeys = func() []string {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("ip:10.0.%d.%d", i/256, i%256)
	}
	return keys
}()

// benchLimit is high enough that every benchmarked request is allowed: a
// million a second, or for the sliding log, whose rate is capped, 10,000
// per 100ms (a few hundred entries per key at these speeds).
func benchLimit(alg algorithms.Algorithm) algorithms.Limit {
	if alg == algorithms.SlidingWindowLog {
		return algorithms.Limit{Rate: algorithms.MaxSlidingLogRate, Period: 100 * time.Millisecond}
	}
	return algorithms.Limit{Rate: 1_000_000, Period: time.Second}
}

func runAllowBench(b *testing.B, l algorithms.Limiter) {
	b.ReportAllocs()
	ctx := context.Background()
	cpu0 := selfCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r, err := l.Allow(ctx, benchKeys[i&(len(benchKeys)-1)], 1)
			if err != nil || !r.Allowed {
				b.Errorf("Allow: %+v, %v", r, err)
				return
			}
			i++
		}
	})
	b.ReportMetric(float64((selfCPU(b)-cpu0).Microseconds())/float64(b.N), "app-µs/op")
}

func BenchmarkMemoryAllow(b *testing.B) {
	for _, alg := range algorithms.All() {
		b.Run(string(alg), func(b *testing.B) {
			l, err := algorithms.New(must(memstore.New()), alg, benchLimit(alg))
			if err != nil {
				b.Fatal(err)
			}
			runAllowBench(b, l)
		})
	}
}

// BenchmarkRedisAllow runs 50 goroutines against one real Redis server, and
// measures a bare EVALSHA of a one-line script in the same run as the
// baseline: the cost of one round trip.
func BenchmarkRedisAllow(b *testing.B) {
	addr := redistest.Standalone(b)
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	defer c.Close()
	b.Run("baseline_evalsha", func(b *testing.B) {
		script := redis.NewScript("return 1")
		b.ReportAllocs()
		b.SetParallelism(25)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := script.Run(context.Background(), c, []string{"k"}).Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	for _, alg := range algorithms.All() {
		b.Run(string(alg), func(b *testing.B) {
			l, err := algorithms.New(must(New(c)), alg, benchLimit(alg))
			if err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(25)
			if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
				b.Fatal(err)
			}
			runAllowBench(b, l)
			b.ReportMetric(scriptMicros(b, c)/float64(b.N), "redis-µs/op")
		})
	}
}

// scriptMicros returns the microseconds Redis spent running scripts
// (EVALSHA and EVAL) since its statistics were last reset: its own cost
// of the decisions, which the client's figures hide behind the round trip.
func scriptMicros(b *testing.B, c *redis.Client) float64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	total := 0.0
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		for _, field := range strings.Split(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), ",") {
			if v, ok := strings.CutPrefix(field, "usec="); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				total += n
			}
		}
	}
	return total
}

// BenchmarkMemoryAllowSerial is one goroutine's latency per decision, where
// BenchmarkMemoryAllow is the throughput of all cores together.
func BenchmarkMemoryAllowSerial(b *testing.B) {
	for _, alg := range algorithms.All() {
		b.Run(string(alg), func(b *testing.B) {
			l, err := algorithms.New(must(memstore.New()), alg, benchLimit(alg))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				r, err := l.Allow(ctx, benchKeys[i&(len(benchKeys)-1)], 1)
				if err != nil || !r.Allowed {
					b.Fatalf("Allow: %+v, %v", r, err)
				}
			}
		})
	}
}

// BenchmarkMemoryAllowNewKeys is a flood of distinct keys, one request each,
// on a store that already holds memstore.DefaultMaxKeys entries: every request makes
// room for its own.
func BenchmarkMemoryAllowNewKeys(b *testing.B) {
	l, err := algorithms.New(must(memstore.New()), algorithms.FixedWindow, algorithms.PerMinute(100))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range memstore.DefaultMaxKeys {
		if _, err := l.Allow(ctx, "full/"+strconv.Itoa(i), 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := l.Allow(ctx, strconv.Itoa(i), 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryAllowWhileExpiring is the requests that follow a million
// keys going quiet, while housekeeping drops them: its worst-µs is the
// longest a request took.
func BenchmarkMemoryAllowWhileExpiring(b *testing.B) {
	var mu sync.Mutex
	now := start
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	l, err := algorithms.New(must(memstore.New(memstore.WithClock(clock))), algorithms.FixedWindow, algorithms.PerMinute(100))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range 1_000_000 {
		if _, err := l.Allow(ctx, ipKey(i), 1); err != nil {
			b.Fatal(err)
		}
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	var worst time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if _, err := l.Allow(ctx, benchKeys[i&(len(benchKeys)-1)], 1); err != nil {
			b.Fatal(err)
		}
		worst = max(worst, time.Since(t0))
	}
	b.ReportMetric(float64(worst.Microseconds()), "worst-µs")
}

func ipKey(i int) string { return fmt.Sprintf("203.%d.%d.%d", i>>16&255, i>>8&255, i&255) }
