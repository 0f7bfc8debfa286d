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

// oddSeed writes the same unusual state to keys a and b, as Redis may hold
// it when a request comes: ones that are not states (a current state with
// a character more among them), one of the wrong type, a call's record
// after the state, the token bucket's former hash, and a leaky bucket's
// state with a reservation's excess, its time ahead or not. (States a clock
// that was ahead left come from the frozen clock moving back.)
func oddSeed(ctx context.Context, c *redis.Client, rng *rand.Rand, alg algorithms.Algorithm, a, b string, now int64) {
	var set func(k string)
	switch rng.IntN(4) {
	case 0:
		v := []string{"", "x", "12:", ":5", "12:5:", "12:5x", "-3:4", "99999999999999999999999:1"}[rng.IntN(8)]
		set = func(k string) { c.Set(ctx, k, v, time.Minute) }
	case 1:
		set = func(k string) { c.Del(ctx, k); c.RPush(ctx, k, "x"); c.PExpire(ctx, k, time.Minute) }
	case 2:
		v, err := c.Get(ctx, a).Result()
		if err != nil || strings.Contains(v, "|") {
			return
		}
		v += []string{"|other 1 1 0 0 5", "x", ":", "7"}[rng.IntN(4)]
		set = func(k string) { c.Set(ctx, k, v, time.Minute) }
	default:
		switch alg {
		case algorithms.TokenBucket:
			t, ts := rng.Int64N(2000)-500, now/1000-rng.Int64N(3000)
			set = func(k string) { c.Del(ctx, k); c.HSet(ctx, k, "t", t, "ts", ts); c.PExpire(ctx, k, time.Minute) }
		case algorithms.LeakyBucket:
			// A reservation's excess, as a clock that was ahead (or not) left it.
			v := fmt.Sprintf("%d:%d:%d", now+rng.Int64N(4_000_000)-1_000_000, rng.Int64N(3), 1+rng.Int64N(40))
			set = func(k string) { c.Set(ctx, k, v, time.Minute) }
		default:
			return
		}
	}
	set(a)
	set(b)
}

// The one-request script (with its call's id, so that an admitted call
// keeps its record after the state) and the batch script answer one
// request of a plain cost as the driver does, and leave the same state and
// expiry, on states the other differential tests never reach: ones a clock
// that was ahead left (the frozen clock here also moves back), ones that
// are not states, keys of the wrong type, states followed by another
// call's record, and the token bucket's former hash; denials included.
// make test takes half of the steps, and holds them to half of the
// coverage; make test-scale (wholeMatrix) takes all 400.
func TestOneAndBatchMatchDriverOnOddStates(t *testing.T) {
	steps := 400
	if !wholeMatrix() {
		steps = 200
	}
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	limits := []algorithms.Limit{
		algorithms.PerSecond(3),
		{Rate: 7, Period: time.Second, Burst: 10},
		{Rate: 5, Period: 250 * time.Millisecond, Burst: 2},
		{Rate: 1_000_000, Period: 1000 * 24 * time.Hour, Burst: 5_000_000}, // coarse units
	}
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindowCounter, algorithms.TokenBucket, algorithms.LeakyBucket} {
		denied := 0 // over the limits: a burst of 2 may see none
		for li, lim := range limits {
			t.Run(fmt.Sprintf("%s/%d", alg, li), func(t *testing.T) {
				p := ratemath.ParamsFor(alg, lim)
				one := frozen(scripts.OneRequest(string(alg), p.Rate, p.Period, p.Burst, p.Unit))
				batch := frozen(scripts.Batch(string(alg), p.Rate, p.Period, p.Burst, p.Unit))
				drv := frozen(driverOf[alg])
				limArgs := []any{p.Rate, p.Period, p.Burst, p.Unit}
				c.FlushAll(ctx)
				rng := rand.New(rand.NewPCG(uint64(li), 23))
				now := int64(1_764_000_000_000_000) // µs
				quota := ratemath.QuotaOf(alg, lim)
				a, b := "a:{k}:s", "b:{k}:s"
				back := 0 // steps with the clock moved back
				// The widest real-time gap between the two keys' writes so
				// far: a step that writes neither key keeps the expiries an
				// earlier, slower step set, so the slack is the run's widest.
				var apart time.Duration
				for step := range steps {
					var moved bool
					if now, moved = frozenStep(ctx, c, rng, now, lim, true, []string{a}, []string{b}); moved {
						back++
					}
					if rng.IntN(4) == 0 {
						oddSeed(ctx, c, rng, alg, a, b, now)
					}
					cost := strconv.Itoa([]int{1, 1, 2, max(quota/2, 1), quota}[rng.IntN(5)])
					id := "id" + strconv.Itoa(step)
					viaOne := rng.IntN(2) == 0
					written := time.Now()
					var ra *redis.Cmd
					if viaOne {
						ra = one.Run(ctx, c, []string{a}, cost, id)
					} else {
						ra = batch.Run(ctx, c, []string{a}, cost)
					}
					rb := drv.Run(ctx, c, []string{b}, append([]any{cost}, limArgs...)...)
					if fmt.Sprint(ra.Val(), ra.Err()) != fmt.Sprint(rb.Val(), rb.Err()) {
						t.Fatalf("step %d, cost %s (one-request %v): %q %v, driver %q %v", step, cost, viaOne, ra.Val(), ra.Err(), rb.Val(), rb.Err())
					}
					reply, _ := ra.Val().(string)
					if strings.HasPrefix(reply, "0 ") {
						denied++
					}
					sa, sb := stateOf(ctx, t, c, a), stateOf(ctx, t, c, b)
					if viaOne && strings.HasPrefix(reply, "1 ") {
						rec := "|" + id + " " + reply
						if !strings.HasSuffix(sa, rec) {
							t.Fatalf("step %d: state %q lacks the call's record %q", step, sa, rec)
						}
						sa = strings.TrimSuffix(sa, rec)
					} else if i := strings.Index(sa, "|"); i >= 0 && strings.HasPrefix(sa, "string ") {
						sa = sa[:i] // a record a seed or an earlier call left, on both sides
						sb, _, _ = strings.Cut(sb, "|")
					}
					if sa != sb && !expiredBetween(ctx, c, a, b, sa, sb) {
						t.Fatalf("step %d, cost %s (one-request %v): states differ: %s, driver %s", step, cost, viaOne, sa, sb)
					}
					apart = max(apart, time.Since(written))
					if ta, tb := expiries(ctx, t, c, a, b); ta-tb > 20*time.Millisecond+apart || tb-ta > 20*time.Millisecond+apart {
						t.Fatalf("step %d: expiries differ: %v, driver %v", step, ta, tb)
					}
				}
				t.Logf("%d steps with the clock moved back", back)
				if back < steps/8 {
					t.Fatalf("the steps covered too little: %d with the clock moved back, want %d or more", back, steps/8)
				}
			})
		}
		t.Logf("%s: %d denials", alg, denied)
		if denied < steps/20 {
			t.Errorf("%s: %d denials over the limits, want %d or more", alg, denied, steps/20)
		}
	}
}
