package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
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

// generalOne is the one-request script built from the algorithm's own
// check and commit (units.lua, <alg>.lua and one.lua), as scripts.OneRequest
// builds it for the limits that have no written-out script: the reference
// for the written-out one on records and calls sent again.
func generalOne(t *testing.T, alg algorithms.Algorithm, p ratemath.Params) string {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile("../lua/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return read("units.lua") + "\n" + read(string(alg)+".lua") + "\n" +
		fmt.Sprintf("local RATE, PERIOD, BURST, UNIT = %d, %d, %d, %d\n", p.Rate, p.Period, p.Burst, p.Unit) +
		read("one_start.lua") + read("one.lua") + read("one_end.lua")
}

// writtenLimits are limits of unit 1 at the edge of it: the largest
// counts and periods for which ratemath.ParamsFor still counts in µs
// (rate × period, or burst × period, at the bound of exact numbers), and
// emission intervals that are no whole number of µs.
func writtenLimits(alg algorithms.Algorithm) []algorithms.Limit {
	day := 24 * time.Hour
	ls := []algorithms.Limit{
		{Rate: 7, Period: 1_000_000_007 * time.Microsecond, Burst: 3},
		{Rate: 1, Period: 1000 * day},
	}
	// Periods so long that the ends of windows pass 2^53 µs.
	long := time.Duration(ratemath.MaxExact) * time.Microsecond
	switch alg {
	case algorithms.SlidingWindowCounter:
		ls = append(ls, algorithms.Limit{Rate: 1, Period: long},
			algorithms.Limit{Rate: int(ratemath.MaxExact / day.Microseconds()), Period: day},
			algorithms.Limit{Rate: int(ratemath.MaxExact / (1000 * day).Microseconds()), Period: 1000 * day})
	case algorithms.TokenBucket, algorithms.LeakyBucket:
		ls = append(ls, algorithms.Limit{Rate: 1, Period: long / 2, Burst: 1},
			algorithms.Limit{Rate: 1, Period: day, Burst: int(ratemath.MaxExact / 2 / day.Microseconds())},
			algorithms.Limit{Rate: 999_983, Period: 3 * time.Second, Burst: int(ratemath.MaxExact / 2 / 3_000_000)})
	default:
		ls = append(ls, algorithms.Limit{Rate: 3, Period: long}, algorithms.Limit{Rate: 1 << 40, Period: 1000 * day})
	}
	return ls
}

// writtenSeed writes one odd state to every key of keys: a token level in
// debt (down to the largest debt a reservation may leave) or over the
// capacity, a leaky bucket's excess up to the capacity, states far ahead
// of or behind the clock, another call's record after the state, or a
// record of the call id about to be sent.
func writtenSeed(ctx context.Context, c *redis.Client, rng *rand.Rand, alg algorithms.Algorithm, p ratemath.Params, now int64, id string, keys []string) {
	cap := p.Burst * p.Period
	far := []int64{0, rng.Int64N(p.Period + 1), 1000 * p.Period, 1 << 50}[rng.IntN(4)]
	if rng.IntN(2) == 0 {
		far = -min(far, now)
	}
	switch {
	case rng.IntN(10) == 0: // a key of another type
		for _, k := range keys {
			c.Del(ctx, k)
			c.RPush(ctx, k, "x")
			c.PExpire(ctx, k, time.Hour)
		}
		return
	case alg == algorithms.TokenBucket && rng.IntN(5) == 0: // the former hash
		level := []int64{-rng.Int64N(cap + 1), cap + 1, rng.Int64N(cap + 1)}[rng.IntN(3)]
		for _, k := range keys {
			c.Del(ctx, k)
			c.HSet(ctx, k, "t", level, "ts", now+far)
			c.PExpire(ctx, k, time.Hour)
		}
		return
	}
	var v string
	switch alg {
	case algorithms.FixedWindow:
		v = fmt.Sprintf("%d:%d", now+far, rng.Int64N(p.Rate+2))
	case algorithms.SlidingWindowCounter:
		v = fmt.Sprintf("%d:%d:%d", now+far, rng.Int64N(p.Rate+2), rng.Int64N(p.Rate+2))
	case algorithms.TokenBucket:
		level := []int64{-rng.Int64N(cap + 1), -(ratemath.MaxExact - 2*cap), cap + rng.Int64N(cap), rng.Int64N(cap + 1)}[rng.IntN(4)]
		v = fmt.Sprintf("%d:%d", level, now+far)
	default:
		v = fmt.Sprintf("%d:%d", now+far, rng.Int64N(p.Rate))
		if rng.IntN(2) == 0 {
			v += ":" + strconv.FormatInt(1+rng.Int64N(cap), 10)
		}
	}
	switch rng.IntN(3) {
	case 0:
		v += "|other 1 1 0 0 5"
	case 1:
		v += "|" + id + " 1 1 42 0 42"
	}
	for _, k := range keys {
		c.Set(ctx, k, v, time.Hour)
	}
}

// writtenW, writtenG and writtenD are the keys of one differential step: the written-out
// script's, the general one-request script's and the driver's, which
// every step starts with the same state.
const writtenW, writtenG, writtenD = "w:{k}:s", "g:{k}:s", "d:{k}:s"

// writtenRun runs one limit's three scripts on their keys.
type writtenRun struct {
	ctx                    context.Context
	c                      *redis.Client
	p                      ratemath.Params
	written, general, drv  *redis.Script
	admitted, denied, sent int // the kinds of steps run: sent is answered from a record
	// changed is when a step last changed the written-out key's state: a
	// step that leaves it as it was may leave its expiry as that step set
	// it, while another script rewrites its own key's expiry.
	changed time.Time
}

// sameExpiry fails t when the PTTLs of keys a and b, read at one instant,
// differ by more than the real time since the earliest the scripts can
// have written them (at) allows.
func (r *writtenRun) sameExpiry(t *testing.T, what, a, b string, at time.Time) {
	t.Helper()
	ta, tb := expiries(r.ctx, t, r.c, a, b)
	if slack := 20*time.Millisecond + time.Since(at); ta-tb > slack || tb-ta > slack {
		t.Fatalf("%s: expiries differ: %s %v, %s %v", what, a, ta, b, tb)
	}
}

// step sends one call of cost whose id argument is arg (id, "!" after it
// when sent again) to the three scripts and compares what they answer and
// leave; the driver is spared a call that the state's record answered.
func (r *writtenRun) step(t *testing.T, what string, cost int64, id, arg string) {
	t.Helper()
	ctx, c, w, g, d := r.ctx, r.c, writtenW, writtenG, writtenD
	before := stateOf(ctx, t, c, w)
	what += fmt.Sprintf(", cost %d, call %q, state %s", cost, arg, before)
	at := time.Now()
	if r.changed.IsZero() {
		r.changed = at
	}
	rw := r.written.Run(ctx, c, []string{w}, cost, arg)
	rg := r.general.Run(ctx, c, []string{g}, cost, arg)
	sw, sg := stateOf(ctx, t, c, w), stateOf(ctx, t, c, g)
	// The written-out key's expiry dates from this step if it changed the
	// state, else from no later than the step that last did.
	set := r.changed
	if sw != before {
		set, r.changed = at, at
	}
	if fmt.Sprint(rw.Val(), rw.Err()) != fmt.Sprint(rg.Val(), rg.Err()) {
		t.Fatalf("%s: written-out %q %v, general %q %v", what, rw.Val(), rw.Err(), rg.Val(), rg.Err())
	}
	if sw != sg && !expiredBetween(ctx, c, w, g, sw, sg) {
		t.Fatalf("%s: states differ: written-out %s, general %s", what, sw, sg)
	}
	r.sameExpiry(t, what, w, g, set)
	reply, _ := rw.Val().(string)
	if strings.HasSuffix(arg, "!") && strings.Contains(before, "|"+id+" ") {
		r.sent++
		if sw != before && sw != "none" {
			t.Fatalf("%s: a call answered from its record %q changed the state to %s", what, reply, sw)
		}
		return
	}
	rd := r.drv.Run(ctx, c, []string{d}, cost, r.p.Rate, r.p.Period, r.p.Burst, r.p.Unit)
	if fmt.Sprint(rw.Val(), rw.Err()) != fmt.Sprint(rd.Val(), rd.Err()) {
		t.Fatalf("%s: written-out %q %v, driver %q %v", what, rw.Val(), rw.Err(), rd.Val(), rd.Err())
	}
	sd := stateOf(ctx, t, c, d)
	if strings.HasPrefix(reply, "1 ") {
		r.admitted++
		if !strings.HasSuffix(sw, "|"+id+" "+reply) && !(goneSoon(sw) && resetWithin(reply, 5*time.Millisecond)) {
			t.Fatalf("%s: state %s lacks the call's record (reply %q)", what, sw, reply)
		}
	} else {
		r.denied++
	}
	sw, _, _ = strings.Cut(sw, "|")
	sd, _, _ = strings.Cut(sd, "|")
	if sw != sd && !expiredBetween(ctx, c, w, d, sw, sd) {
		t.Fatalf("%s: states differ: written-out %s, driver %s", what, sw, sd)
	}
	r.sameExpiry(t, what, w, d, set)
}

// sync gives the general script's and the driver's keys the written-out
// script's state, expiry and all: the next step starts from one state.
func (r *writtenRun) sync() {
	r.c.Del(r.ctx, writtenG, writtenD)
	r.c.Copy(r.ctx, writtenW, writtenG, 0, true)
	r.c.Copy(r.ctx, writtenW, writtenD, 0, true)
}

// The written-out one-request scripts answer, write and keep records as
// the general one-request script (the algorithm's check and commit) does,
// byte for byte, and as the driver does, records aside, on limits at the
// edge of unit 1 (see writtenLimits), costs from 1 to the quota, odd
// states (writtenSeed), clocks moved far, and calls sent again ("!"): a
// call sent again whose record is in the state answers it and changes
// nothing; one whose record is not decides as a new call does.
func TestWrittenOutOneScriptsMatchAtBounds(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	keys := []string{writtenW, writtenG, writtenD}
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindowCounter, algorithms.TokenBucket, algorithms.LeakyBucket} {
		for li, lim := range writtenLimits(alg) {
			t.Run(fmt.Sprintf("%s/%d", alg, li), func(t *testing.T) {
				p := ratemath.ParamsFor(alg, lim)
				if p.Unit != 1 {
					t.Fatalf("%+v counts in units of %d µs, want 1", lim, p.Unit)
				}
				src := scripts.OneRequest(string(alg), p.Rate, p.Period, p.Burst, p.Unit)
				if strings.Contains(src, "local function check") {
					t.Fatal("scripts.OneRequest gave the general script, want the written-out one")
				}
				r := &writtenRun{ctx: ctx, c: c, p: p, written: frozen(src), general: frozen(generalOne(t, alg, p)), drv: frozen(driverOf[alg])}
				c.FlushAll(ctx)
				rng := rand.New(rand.NewPCG(uint64(li), 41))
				now := int64(1_764_000_000_000_000)
				quota := int64(ratemath.QuotaOf(alg, lim))
				prev := ""
				steps := stepsOf(500) // make test: 125
				for step := range steps {
					// PTTL answers 0 for a key with less than a ms left, which
					// frozenStep keeps: it would expire between two calls.
					for _, k := range keys {
						if pt := c.PTTL(ctx, k).Val(); pt >= 0 && pt < 200*time.Millisecond {
							c.Del(ctx, keys...)
						}
					}
					now, _ = frozenStep(ctx, c, rng, now, lim, true, keys[:2], keys[1:])
					if rng.IntN(30) == 0 {
						now += []int64{-1, 1}[rng.IntN(2)] * rng.Int64N(100*p.Period+1) % (now / 2)
					}
					if now < 1e15 || now > 4e15 { // a clock of this century
						now = 1_764_000_000_000_000 + rng.Int64N(1e12)
					}
					c.HSet(ctx, "attack3:clock", "s", now/1_000_000, "us", now%1_000_000)
					id := "c" + strconv.Itoa(step)
					if rng.IntN(4) == 0 && prev != "" {
						id = prev // the previous call, sent again
					}
					prev = id
					if rng.IntN(4) == 0 {
						writtenSeed(ctx, c, rng, alg, p, now, id, keys)
					}
					arg := id
					if rng.IntN(3) > 0 {
						arg += "!"
					}
					cost := []int64{1, 1 + rng.Int64N(quota), quota, max(quota/2, 1)}[rng.IntN(4)]
					r.step(t, fmt.Sprintf("step %d, now %d", step, now), cost, id, arg)
					r.sync()
				}
				// Coverage, as a share of the steps: a fiftieth admitted,
				// a twelfth denied, a twenty-fifth answered from a record.
				if r.admitted < steps/50 || r.denied < steps/12 || r.sent < steps/25 {
					t.Fatalf("too little covered: %d admitted, %d denied, %d answered from a record", r.admitted, r.denied, r.sent)
				}
				t.Logf("%d admitted, %d denied, %d answered from a record", r.admitted, r.denied, r.sent)
			})
		}
	}
}

// Under maxmemory, where Redis refuses every write, the written-out
// scripts answer the error the driver answers, on a new key (the write of
// a commit) and on a full state a clock that was ahead left (the write of
// the correction, before a denial that writes nothing else).
func TestWrittenOutOneScriptsOutOfMemory(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	lim := algorithms.Limit{Rate: 7, Period: time.Second, Burst: 3}
	now := int64(1_764_000_000_000_000)
	ahead := map[algorithms.Algorithm]string{
		algorithms.FixedWindow:          fmt.Sprintf("%d:7", now+5_000_000),
		algorithms.SlidingWindowCounter: fmt.Sprintf("%d:7:0", now+5_000_000),
		algorithms.TokenBucket:          fmt.Sprintf("0:%d", now+5_000_000),
		algorithms.LeakyBucket:          fmt.Sprintf("%d:0", now+50_000_000),
	}
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindowCounter, algorithms.TokenBucket, algorithms.LeakyBucket} {
		for _, state := range []string{"", ahead[alg]} {
			t.Run(fmt.Sprintf("%s/%q", alg, state), func(t *testing.T) {
				p := ratemath.ParamsFor(alg, lim)
				c.ConfigSet(ctx, "maxmemory", "0")
				c.FlushAll(ctx)
				c.HSet(ctx, "attack3:clock", "s", now/1_000_000, "us", now%1_000_000)
				if state != "" {
					c.Set(ctx, "w:{k}:s", state, time.Hour)
					c.Set(ctx, "d:{k}:s", state, time.Hour)
				}
				if err := c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
					t.Fatal(err)
				}
				if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
					t.Fatal(err)
				}
				defer c.ConfigSet(ctx, "maxmemory", "0")
				rw := frozen(scripts.OneRequest(string(alg), p.Rate, p.Period, p.Burst, p.Unit)).Run(ctx, c, []string{"w:{k}:s"}, 1, "id!")
				rd := frozen(driverOf[alg]).Run(ctx, c, []string{"d:{k}:s"}, 1, p.Rate, p.Period, p.Burst, p.Unit)
				if rw.Err() == nil || fmt.Sprint(rw.Val(), rw.Err()) != fmt.Sprint(rd.Val(), rd.Err()) {
					t.Fatalf("written-out %q %v, driver %q %v; want the driver's error", rw.Val(), rw.Err(), rd.Val(), rd.Err())
				}
			})
		}
	}
}

// goneSoon reports whether a state read as sw had expired by then.
func goneSoon(sw string) bool { return sw == "none" }

// resetWithin reports whether an admission's reply says its state is
// whole again, and so expires, within d: a state written with a lifetime
// that short on the frozen clock may be gone in real time before the test
// reads it.
func resetWithin(reply string, d time.Duration) bool {
	f := strings.Fields(reply)
	if len(f) != 5 {
		return false
	}
	us, err := strconv.ParseInt(f[4], 10, 64)
	return err == nil && time.Duration(us)*time.Microsecond <= d
}
