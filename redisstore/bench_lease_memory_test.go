package redisstore

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memstore"
)

// benchLeaseRun numbers the leased benchmarks' stores, so that every run
// (-count) starts from fresh keys in Redis.
var benchLeaseRun atomic.Int64

// BenchmarkLeasedVsMemory sets a decision from a lease beside the memory
// store's Allow, on the same limit and the same 16 hot keys, never denied:
// for each leased algorithm, one goroutine (serial) and RunParallel
// (parallel). Issue 27's promise 4 is leased ≤ 1.5× memory; compare the
// pairs of one run (benchstat, or medians of -count rounds).
func BenchmarkLeasedVsMemory(b *testing.B) {
	addr := redistest.Standalone(b)
	lim := algorithms.Limit{Rate: 2_000_000, Period: time.Hour} // unit 1 for the sliding counter (rate × period within 2^53 µs): leased
	var keys [16]string
	for i := range keys {
		keys[i] = "hot-" + keyName(i)
	}
	for _, alg := range leaseAlgorithms {
		for _, par := range []string{"serial", "parallel"} {
			for _, store := range []string{"memory", "leased"} {
				b.Run(string(alg)+"/"+par+"/"+store, func(b *testing.B) {
					var l algorithms.Limiter
					if store == "memory" {
						l = must(algorithms.New(must(memstore.New()), alg, lim))
					} else {
						c := redis.NewClient(&redis.Options{Addr: addr})
						defer func() { _ = c.Close() }()
						s := must(New(c, WithLeases(time.Second), WithEvictionAllowed(), WithLogger(quietLogger()),
							WithTimeout(5*time.Second), WithPrefix("bench-lvm-"+strconv.FormatInt(benchLeaseRun.Add(1), 10))))
						defer func() { _ = s.Close(closeCtx()) }()
						l = must(algorithms.New(s, alg, lim))
						warmLeases(b, l, keys[:])
					}
					benchHotKeys(b, l, keys[:], par == "parallel")
				})
			}
		}
	}
}

// warmLeases sends each key requests until its decisions come from
// leases of more than a few units: the state a hot key is in.
func warmLeases(b *testing.B, l algorithms.Limiter, keys []string) {
	b.Helper()
	ctx := context.Background()
	for range 20 {
		for _, k := range keys {
			for range 200 {
				if res, err := l.Allow(ctx, k, 1); err != nil || !res.Allowed {
					b.Fatalf("warm-up: %+v %v", res, err)
				}
			}
		}
		time.Sleep(2 * time.Millisecond) // renewals land
	}
}

// benchHotKeys decides b.N requests over keys, never denied, from one
// goroutine or from RunParallel's.
func benchHotKeys(b *testing.B, l algorithms.Limiter, keys []string, parallel bool) {
	ctx := context.Background()
	n := uint32(len(keys))
	b.ReportAllocs()
	b.ResetTimer()
	if !parallel {
		for i := range uint32(b.N) {
			if res, err := l.Allow(ctx, keys[i%n], 1); err != nil || !res.Allowed {
				b.Fatalf("%+v %v", res, err)
			}
		}
		return
	}
	var next atomic.Uint32
	b.RunParallel(func(pb *testing.PB) {
		i := next.Add(7)
		for pb.Next() {
			i++
			if res, err := l.Allow(ctx, keys[i%n], 1); err != nil || !res.Allowed {
				b.Errorf("%+v %v", res, err)
				return
			}
		}
	})
}
