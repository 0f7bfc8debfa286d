package scriptcost

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
	"github.com/redlimit/redlimit/internal/scripts"
)

// perCall is the decisions of one batched call: about what redlimit's
// calls carry from 50 goroutines (BenchmarkLoaded's decisions/call).
const perCall = 9

// BenchmarkBatched sends calls of perCall keys, one request each,
// straight to each algorithm's batch script (scripts.Batch) and to
// batchFloor, which decides nothing: what is left between them is the
// algorithms' own work. Six goroutines keep Redis busy with calls of the
// same size, with no batcher between (BenchmarkLoaded has redlimit's).
// Each subject has keys of its own, and a call fails on a denial or a
// key's error. Figures per decision, as measure reports them.
func BenchmarkBatched(b *testing.B) {
	c := server(b)
	names := []string{"batch_floor"}
	byName := map[string]*redis.Script{"batch_floor": redis.NewScript(batchFloor)}
	for _, alg := range algorithms.All() {
		p := ratemath.ParamsFor(alg, limit(alg))
		names = append(names, string(alg))
		byName[string(alg)] = redis.NewScript(scripts.Batch(string(alg), p.Rate, p.Period, p.Burst, p.Unit))
	}
	costs := strings.TrimSuffix(strings.Repeat("1,", perCall), ",")
	for _, name := range names {
		s := byName[name]
		call := func(ctx context.Context, i int) error {
			ks := make([]string, 0, perCall+1)
			for j := range perCall {
				ks = append(ks, "b:"+name+":"+keys[(i*perCall+j*7)%len(keys)])
			}
			ks = append(ks, "b:"+name+":once:"+strconv.Itoa(i))
			r, err := s.Run(ctx, c, ks, costs, "2200").Text()
			if err == nil && (strings.Contains(","+r, ",0 ") || strings.Contains(","+r, ",E")) {
				err = fmt.Errorf("a request was denied or failed: %s", r)
			}
			return err
		}
		b.Run(name, func(b *testing.B) { measure(b, c, 6, perCall, call) })
	}
}
