package scriptcost

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
	"github.com/redlimit/redlimit/lua"
)

// perCall is the decisions of one batched call: about what redlimit's
// calls carry from 50 goroutines (BenchmarkLoaded's decisions/call).
const perCall = 9

// BenchmarkBatched sends calls of perCall keys, one request each, from 6
// goroutines straight to each algorithm's batch script (lua.Batch) and to
// batchFloor, which decides nothing: what is left between them is the
// algorithms' own work. Per decision, as run's.
func BenchmarkBatched(b *testing.B) {
	c := server(b)
	names := []string{"batch_floor"}
	scripts := map[string]*redis.Script{"batch_floor": redis.NewScript(batchFloor)}
	for _, alg := range algorithms.Algorithms {
		p := ratemath.ParamsFor(alg, limit(alg))
		names = append(names, string(alg))
		scripts[string(alg)] = redis.NewScript(lua.Batch(string(alg), p.Rate, p.Period, p.Burst, p.Unit))
	}
	costs := strings.TrimSuffix(strings.Repeat("1,", perCall), ",")
	for _, name := range names {
		s := scripts[name]
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			call := func(i int) error {
				ks := make([]string, 0, perCall+1)
				for j := range perCall {
					ks = append(ks, "b:"+keys[(i*perCall+j*7)%len(keys)])
				}
				ks = append(ks, "once:"+strconv.Itoa(i))
				r, err := s.Run(ctx, c, ks, costs, "2200").Text()
				if err == nil && strings.Contains(","+r, ",0 ") {
					err = fmt.Errorf("a request was denied: %s", r)
				}
				return err
			}
			for i := range 2 * len(keys) / perCall {
				if err := call(i); err != nil {
					b.Fatal(err)
				}
			}
			if err := c.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			cpu0 := cpuNanos(b)
			var wg sync.WaitGroup
			var mu sync.Mutex
			next := 0
			b.ResetTimer()
			for range 6 {
				wg.Go(func() {
					for {
						mu.Lock()
						i := next
						next++
						mu.Unlock()
						if i >= b.N {
							return
						}
						if err := call(len(keys) + i); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			n := float64(b.N * perCall)
			us, _ := redisMicros(b, c)
			b.ReportMetric(float64(cpuNanos(b)-cpu0)/1e3/n, "cpu-µs/op")
			b.ReportMetric(us/n, "redis-µs/op")
		})
	}
}
