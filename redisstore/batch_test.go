package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/internal/scripts"
)

// driverOf is each algorithm's driver script.
var driverOf = map[algorithms.Algorithm]string{
	algorithms.FixedWindow: scripts.FixedWindow, algorithms.SlidingWindowLog: scripts.SlidingWindowLog,
	algorithms.SlidingWindowCounter: scripts.SlidingWindowCounter, algorithms.TokenBucket: scripts.TokenBucket,
	algorithms.LeakyBucket: scripts.LeakyBucket,
}

// batchStep is one random call of TestBatchScriptMatchesDriver: the keys
// it decides (indexes), the costs list, and its exactly-once arguments.
type batchStep struct {
	keys  []int
	list  string
	once  bool
	ttl   string
	again bool // sent again: the previous step's reply key, ttl negative
}

// randomBatch draws a call of plain costs on 1 to keys of n keys, each
// with 1 to 3 requests of costs up to a little over quota.
func randomBatch(rng *rand.Rand, n, quota int) batchStep {
	var s batchStep
	s.keys = rng.Perm(n)[:1+rng.IntN(n)]
	groups := make([]string, len(s.keys))
	for i := range groups {
		costs := make([]string, 1+rng.IntN(3)*rng.IntN(2))
		for j := range costs {
			costs[j] = strconv.Itoa([]int{1, 1, 1, 2, max(quota/2, 1), quota, quota + 1}[rng.IntN(7)])
		}
		groups[i] = strings.Join(costs, " ")
	}
	s.list = strings.Join(groups, ",")
	s.once = rng.IntN(4) > 0
	s.ttl = []string{"60000", "-60000"}[rng.IntN(2)]
	s.again = s.once && rng.IntN(8) == 0
	return s
}

// The batch script and the driver give the same answers and leave the
// same states (and expiries, and kept replies) for calls of plain costs on
// several keys of a limiter of one limit, several requests per key,
// denials included, on random sequences in which the driver's other kinds
// run on both sides in between; a key that holds a value of the wrong
// type answers its error alone, the others theirs, and a call sent again
// answers its kept reply. Limits include coarse time units.
func TestBatchScriptMatchesDriver(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	limits := []algorithms.Limit{
		algorithms.PerSecond(3),
		{Rate: 7, Period: time.Second, Burst: 10},
		{Rate: 5, Period: 250 * time.Millisecond, Burst: 2},
		{Rate: 1_000_003, Period: 97 * 24 * time.Hour},
	}
	const nkeys = 4
	for _, alg := range algorithms.All() {
		for li, lim := range limits {
			t.Run(fmt.Sprintf("%s/%d", alg, li), func(t *testing.T) {
				p := ratemath.ParamsFor(alg, lim)
				batch := frozen(scripts.Batch(string(alg), p.Rate, p.Period, p.Burst, p.Unit))
				drv := frozen(driverOf[alg])
				limArgs := []any{p.Rate, p.Period, p.Burst, p.Unit}
				c.FlushAll(ctx)
				rng := rand.New(rand.NewPCG(uint64(li), 11))
				now := int64(1_764_000_000_000_000) // µs
				quota := ratemath.QuotaOf(alg, lim)
				periodUs := lim.Period.Microseconds()
				var a, b [nkeys]string
				for i := range nkeys {
					a[i], b[i] = fmt.Sprintf("a:{k}:%d", i), fmt.Sprintf("b:{k}:%d", i)
				}
				var isolated, denied, multi int // what the steps covered
				for step := range stepsOf(500) {
					now, _ = frozenStep(ctx, c, rng, now, lim, false, a[:], b[:])
					switch rng.IntN(12) {
					case 0:
						// A key of the wrong type on both sides, until it expires.
						i := rng.IntN(nkeys)
						c.Del(ctx, a[i], b[i])
						c.RPush(ctx, a[i], "x")
						c.RPush(ctx, b[i], "x")
						c.PExpire(ctx, a[i], 2*time.Second)
						c.PExpire(ctx, b[i], 2*time.Second)
					case 1, 2:
						// The driver's other kinds, on one key of both sides.
						i := rng.IntN(nkeys)
						list := []string{"p1", fmt.Sprintf("d%d:%d", rng.Int64N(3*periodUs), 1+rng.IntN(quota)),
							fmt.Sprintf("r%d/%d", 1+rng.IntN(2), rng.Int64N(periodUs)), fmt.Sprintf("c%d", 1+rng.IntN(quota)),
							fmt.Sprintf("o%d", 1+rng.IntN(3*quota))}[rng.IntN(5)]
						ra := drv.Run(ctx, c, []string{a[i]}, append([]any{list}, limArgs...)...)
						rb := drv.Run(ctx, c, []string{b[i]}, append([]any{list}, limArgs...)...)
						if fmt.Sprint(ra.Val(), ra.Err()) != fmt.Sprint(rb.Val(), rb.Err()) {
							t.Fatalf("step %d, driver %q on both: %q %v, %q %v", step, list, ra.Val(), ra.Err(), rb.Val(), rb.Err())
						}
					}
					s := randomBatch(rng, nkeys, quota)
					ka, kb := make([]string, 0, len(s.keys)+1), make([]string, 0, len(s.keys)+1)
					for _, i := range s.keys {
						ka, kb = append(ka, a[i]), append(kb, b[i])
					}
					onceA, onceB := fmt.Sprintf("a:{k}:once:%d", step), fmt.Sprintf("b:{k}:once:%d", step)
					if s.again && step > 0 {
						onceA, onceB, s.ttl = fmt.Sprintf("a:{k}:once:%d", step-1), fmt.Sprintf("b:{k}:once:%d", step-1), "-60000"
					}
					bargs, dargs := []any{s.list}, append([]any{s.list}, limArgs...)
					if s.once {
						ka, kb = append(ka, onceA), append(kb, onceB)
						bargs, dargs = append(bargs, s.ttl), append(dargs, s.ttl)
					}
					written := time.Now()
					ra := batch.Run(ctx, c, ka, bargs...)
					rb := drv.Run(ctx, c, kb, dargs...)
					if fmt.Sprint(ra.Val(), ra.Err()) != fmt.Sprint(rb.Val(), rb.Err()) {
						t.Fatalf("step %d, %q on %v (once %v %s): batch %q %v, driver %q %v", step, s.list, s.keys, s.once, s.ttl, ra.Val(), ra.Err(), rb.Val(), rb.Err())
					}
					apart := time.Since(written)
					reply := ra.Val()
					if r, ok := reply.(string); ok {
						if strings.HasPrefix(r, "E") || strings.Contains(r, ",E") {
							isolated++
						}
						if strings.HasPrefix(r, "0 ") || strings.Contains(r, " 0 1 ") || strings.Contains(r, ",0 ") {
							denied++
						}
						if strings.Contains(r, ",") {
							multi++
						}
					}
					for i := range nkeys {
						sa, sb := stateOf(ctx, t, c, a[i]), stateOf(ctx, t, c, b[i])
						if sa != sb && !expiredBetween(ctx, c, a[i], b[i], sa, sb) {
							t.Fatalf("step %d, %q: key %d's states differ: batch %s, driver %s", step, s.list, i, sa, sb)
						}
						if ta, tb := expiries(ctx, t, c, a[i], b[i]); ta-tb > 20*time.Millisecond+apart || tb-ta > 20*time.Millisecond+apart {
							t.Fatalf("step %d, %q: key %d's expiries differ: batch %v, driver %v", step, s.list, i, ta, tb)
						}
					}
					if ka, kb := c.Get(ctx, onceA).Val(), c.Get(ctx, onceB).Val(); ka != kb {
						t.Fatalf("step %d, %q: kept replies differ: batch %q, driver %q", step, s.list, ka, kb)
					}
				}
				if isolated == 0 || denied == 0 || multi == 0 {
					t.Errorf("the steps covered %d isolated errors, %d denials, %d calls of several keys; want some of each", isolated, denied, multi)
				}
			})
		}
	}
}

// A flush's call of plain costs on a limiter of one limit, but for one
// request alone (the one-request script's), goes to the batch script with
// the costs and the reply's lifetime as its arguments; a limiter of two
// limits sends the driver, with the limits' arguments.
func TestBatchScriptChosen(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	s := must(New(c, WithPrefix("bc")))
	defer s.Close(closeCtx())
	one, err := algorithms.New(s, algorithms.TokenBucket, algorithms.PerMinute(5))
	if err != nil {
		t.Fatal(err)
	}
	two, err := algorithms.New(s, algorithms.TokenBucket, algorithms.PerMinute(5), algorithms.PerHour(50))
	if err != nil {
		t.Fatal(err)
	}
	l1, l2 := one.(*redisLimiter), two.(*redisLimiter)
	jobs := func(l *redisLimiter, costs ...[]int) []*job {
		js := make([]*job, len(costs))
		for i, c := range costs {
			js[i] = &job{l: l, key: fmt.Sprint("k", i), costs: c}
		}
		return js
	}
	for _, tc := range []struct {
		name   string
		jobs   []*job
		script *redis.Script
		args   int // before the reply's lifetime
		list   string
	}{
		{"one limit, two keys", jobs(l1, []int{1}, []int{2, 1}), l1.scriptBatch, 1, "1,2 1"},
		{"one limit, one key, two requests", jobs(l1, []int{1, 3}), l1.scriptBatch, 1, "1 3"},
		{"one limit, one request", jobs(l1, []int{1}), l1.scriptOne, 1, "1"},
		{"two limits, two keys", jobs(l2, []int{1}, []int{1}), l2.script, 9, "1,1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, withOnce := range []bool{false, true} {
				call := &scriptCall{l: tc.jobs[0].l, jobs: tc.jobs}
				call.assemble(withOnce)
				want := tc.args
				if withOnce {
					want++
				}
				if call.script != tc.script || len(call.args) != want || fmt.Sprint(call.args[0]) != tc.list {
					t.Errorf("once %v: script %p with %d args %v; want %p with %d, the first %q", withOnce, call.script, len(call.args), call.args, tc.script, want, tc.list)
				}
			}
		})
	}
}
