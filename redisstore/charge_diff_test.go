package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// Random sequences of requests, reservations, refunds and charges on the
// memory store and on the scripts (in miniredis): every Result must be
// identical, and with one limit a charge leaves exactly what was left
// before it less its cost, or nothing when that is less. A request denied
// after a charge (a bucket in debt, say) is told a RetryAfter that is
// exactly enough, and after its ResetAfter the whole quota is back.
func TestDifferentialCharges(t *testing.T) {
	runEach(t, runChargeDifferential, differentialLimits, 300, false)
}

// The same with a server clock that steps back and forth: the corrections
// a charge makes agree too.
func TestDifferentialChargesClockSteps(t *testing.T) {
	runEach(t, runChargeDifferential, differentialLimits[:5], 400, true)
}

// The same with limits at every scale: a charge's debt stays exact in
// every unit the limits compute in.
func TestDifferentialChargesLargeLimits(t *testing.T) {
	for _, alg := range algorithms.All() {
		for _, l := range largeLimitsFor(alg) {
			t.Run(fmt.Sprintf("%s/%s", alg, l), func(t *testing.T) {
				t.Parallel()
				runChargeDifferential(t, alg, []algorithms.Limit{l}, uint64(l.Rate)^uint64(l.Period)+500, false)
			})
		}
	}
}

func runChargeDifferential(t *testing.T, alg algorithms.Algorithm, limits []algorithms.Limit, seed uint64, clockSteps bool) {
	p := newDiffPair(t, alg, limits, clockSteps, sweepFor(clockSteps))
	mem, red, advance, maxCost := p.mem, p.red, p.advance, p.maxCost
	// The scripts are exact while the times a bucket reaches stay below
	// 2^53 µs (the year 2255), and a bucket in debt is whole again up to
	// twice its refill from now: a wait is checked only when the times it
	// leads to stay in range (a wait, the quota back, then a debt again).
	var refill time.Duration
	for _, l := range limits {
		refill = max(refill, ratemath.WindowOf(alg, l))
	}
	tooFar := func(d time.Duration) bool {
		return p.clock().UnixMicro()+d.Microseconds()+4*refill.Microseconds() >= 1<<53
	}
	ctx := context.Background()
	allow := func(step int, key string, cost int) algorithms.Result {
		t.Helper()
		a, errA := mem.Allow(ctx, key, cost)
		b, errB := red.Allow(ctx, key, cost)
		return agree(t, step, "allow", a, b, errA, errB)
	}
	rng := rand.New(rand.NewPCG(seed, uint64(len(alg))))
	keys := []string{"x", "y"}
	for step := range stepsOf(400) {
		wander(rng, advance, limits[0].Period, clockSteps)
		key := keys[rng.IntN(len(keys))]
		cost := 1 + rng.IntN(maxCost)
		switch r := rng.IntN(8); {
		case r < 3:
			// A charge, often above what is left, sometimes above the quota.
			if rng.IntN(3) == 0 {
				cost = 1 + rng.IntN(3*maxCost)
			}
			// Not always a peek first: it would store the corrections a
			// clock that stepped back calls for before the charge does.
			peeked := len(limits) == 1 && rng.IntN(2) == 0
			var before algorithms.Result
			if peeked {
				before = agree(t, step, "peek", peek(ctx, t, mem, key), peek(ctx, t, red, key), nil, nil)
			}
			a, errA := mem.Charge(ctx, key, cost)
			b, errB := red.Charge(ctx, key, cost)
			after := agree(t, step, "charge", a, b, errA, errB)
			if peeked && after.Remaining != max(leftOf(before)-cost, 0) {
				t.Fatalf("step %d: charge of %d left %d, with %d left before it (%+v)",
					step, cost, after.Remaining, leftOf(before), before)
			}
		case r < 4:
			a, errA := mem.Refund(ctx, key, cost, 0)
			b, errB := red.Refund(ctx, key, cost, 0)
			agree(t, step, "refund", a, b, errA, errB)
		case r < 5 && alg.CanReserve():
			// A reservation may leave a debt or a backlog past the
			// capacity, from which a charge takes nothing.
			maxDelay := randMicros(rng, min(limits[0].Period, algorithms.MaxDelay))
			a, errA := mem.Reserve(ctx, key, cost, maxDelay)
			b, errB := red.Reserve(ctx, key, cost, maxDelay)
			agree(t, step, "reserve", a, b, errA, errB)
		default:
			res := allow(step, key, cost)
			if !res.Allowed && rng.IntN(3) == 0 && !tooFar(res.RetryAfter) {
				checkWait(t, step, advance, allow, key, cost, res, len(limits) == 1 && rng.IntN(2) == 0)
			}
		}
	}
}

// peek is l's Peek, which must not fail.
func peek(ctx context.Context, t *testing.T, l algorithms.RateLimiter, key string) algorithms.Result {
	t.Helper()
	r, err := l.Peek(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// leftOf is what a Peek (a request of cost 1) found left before it.
func leftOf(p algorithms.Result) int {
	if p.Allowed {
		return p.Remaining + 1
	}
	return p.Remaining
}
