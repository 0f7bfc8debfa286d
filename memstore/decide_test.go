package memstore

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
)

// A limiter of one limit decides on its own path (decideOne); it must
// answer as the path of several limits does when the other limits never
// bind: the same limit beside one far larger, on the same clock, over the
// same random requests, reservations and steps of time, back ones too.
func TestMemoryOneLimitPathMatchesSeveral(t *testing.T) {
	ctx := context.Background()
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			lim := algorithms.Limit{Rate: 10, Period: time.Second, Burst: 4}
			wide := algorithms.Limit{Rate: 10_000, Period: time.Hour}
			clock := storetest.NewManualClock(start)
			one := mustNew(t, must(New(WithClock(clock.Now))), alg, lim).(algorithms.RateLimiter)
			two := mustNew(t, must(New(WithClock(clock.Now))), alg, lim, wide).(algorithms.RateLimiter)
			rng := rand.New(rand.NewPCG(7, uint64(len(alg))))
			for i := range 2000 {
				key := []string{"a", "b", "c"}[rng.IntN(3)]
				cost := 1 + rng.IntN(2)
				var got, want algorithms.Result
				var errGot, errWant error
				if one.Algorithm().CanReserve() && rng.IntN(3) == 0 {
					d := time.Duration(rng.IntN(300)) * time.Millisecond
					got, errGot = one.Reserve(ctx, key, cost, d)
					want, errWant = two.Reserve(ctx, key, cost, d)
				} else {
					got, errGot = one.Allow(ctx, key, cost)
					want, errWant = two.Allow(ctx, key, cost)
				}
				if errGot != nil || errWant != nil {
					t.Fatalf("request %d: errors %v, %v", i, errGot, errWant)
				}
				if got != want {
					t.Fatalf("request %d (%s, cost %d): one limit %+v, two %+v", i, key, cost, got, want)
				}
				step := time.Duration(rng.IntN(150_000)) * time.Microsecond
				if rng.IntN(20) == 0 {
					step = -10 * step // a clock stepped back: decide corrects what it left
				}
				clock.Advance(step)
			}
		})
	}
}

// Allow for a key that has state allocates nothing, with one limit or
// several, in a steady state (the clock moves two requests' worth per call,
// so every request passes and the sliding window log's ring no longer
// grows).
func TestMemoryAllowAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	for _, alg := range algorithms.All() {
		for _, limits := range [][]algorithms.Limit{
			{algorithms.PerSecond(100)},
			{algorithms.PerSecond(100), algorithms.PerMinute(10_000)},
		} {
			t.Run(string(alg), func(t *testing.T) {
				clock := storetest.NewManualClock(start)
				l := mustNew(t, must(New(WithClock(clock.Now))), alg, limits...)
				allow := func() {
					clock.Advance(20 * time.Millisecond) // half the rate
					if r, err := l.Allow(ctx, "k", 1); err != nil || !r.Allowed {
						t.Fatalf("Allow: %+v, %v", r, err)
					}
				}
				for range 500 {
					allow()
				}
				if n := testing.AllocsPerRun(200, allow); n != 0 {
					t.Fatalf("%d limits: %.2f allocations per Allow, want 0", len(limits), n)
				}
			})
		}
	}
}

// Without WithClock the store reads the monotonic clock from the wall time
// at New: it reads the wall time, to the µs, while the wall clock is not
// stepped.
func TestMemoryDefaultClockIsWallTime(t *testing.T) {
	s := must(New())
	for range 3 {
		before := time.Now().UnixMicro()
		now := s.now()
		after := time.Now().UnixMicro()
		if now < before-1 || now > after+1 {
			t.Fatalf("store time %d µs, wall time between %d and %d", now, before, after)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
