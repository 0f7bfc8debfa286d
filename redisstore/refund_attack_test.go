package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
)

// A refund whose reply is lost, and which the client therefore sends
// again, gives back once: the driver keeps a refund's reply like a
// consuming call's.
func TestLostRefundCountsOnce(t *testing.T) {
	counts := &dropCounts{}
	proxyAddr, direct := lossyRedis(t, counts)
	c := redis.NewClient(&redis.Options{Addr: proxyAddr})
	defer c.Close()
	ctx := context.Background()
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			prefix := "refund-once-" + string(alg)
			l, err := algorithms.New(must(New(c, WithPrefix(prefix), WithTimeout(time.Second), WithDenialCache(0))), alg, onceLimit)
			if err != nil {
				t.Fatal(err)
			}
			probe, err := algorithms.New(must(New(direct, WithPrefix(prefix), WithTimeout(5*time.Second))), alg, onceLimit)
			if err != nil {
				t.Fatal(err)
			}
			loadScripts(t, direct, l)
			for range 6 {
				if r, err := probe.Allow(ctx, "k", 1); err != nil || !r.Allowed {
					t.Fatalf("Allow: %+v, %v", r, err)
				}
			}
			for i := range 3 {
				scripts, dropped := counts.scripts.Load(), counts.dropped.Load()
				counts.arm(1)
				_, err := l.Refund(ctx, "k", 1, 0)
				counts.arm(0)
				if err != nil {
					t.Fatal(err)
				}
				if counts.dropped.Load() != dropped+1 || counts.scripts.Load()-scripts != 2 {
					t.Fatalf("refund %d: %d replies dropped, %d calls sent; want 1 and 2 (the retry)",
						i, counts.dropped.Load()-dropped, counts.scripts.Load()-scripts)
				}
				if got := used(t, probe, "k"); got != 5-i {
					t.Errorf("after refund %d sent twice: %d units used, want %d", i+1, got, 5-i)
				}
			}
		})
	}
}

// A client whose slow requests straddle a window's end cannot use their
// refunds to pass more than the quota in the next window: a refund gives
// back from the current window only when that window had begun when the
// units were taken; for the sliding log, not once they have left it.
// On both stores, on one stepped clock.
func TestRefundNeverCrossesWindows(t *testing.T) {
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindowCounter, algorithms.SlidingWindowLog} {
		for _, later := range []time.Duration{time.Second, time.Second + time.Millisecond, 3 * time.Second} {
			t.Run(fmt.Sprintf("%s/%s", alg, later), func(t *testing.T) {
				mem, red, set := steppedStores(t, alg, algorithms.PerSecond(10))
				for name, l := range map[string]algorithms.Limiter{"memory": mem, "redis": red} {
					at := start.Add(time.Duration(len(name)) * time.Hour)
					set(at)
					mustAllow(t, l, 10, true) // ten slow requests reserve
					set(at.Add(later))
					// Others fill what the window lets through now.
					for {
						r, err := l.Allow(context.Background(), "k", 1)
						if err != nil {
							t.Fatal(err)
						}
						if !r.Allowed {
							break
						}
					}
					// The slow requests end and give their units back.
					r, err := l.(algorithms.RateLimiter).Refund(context.Background(), "k", 10, later)
					if err != nil {
						t.Fatal(err)
					}
					if r.Remaining != 0 {
						t.Errorf("%s: refund of units taken %s ago in an earlier window: %+v", name, later, r)
					}
					mustAllow(t, l, 1, false)
				}
			})
		}
	}
}

// Within one window a refund gives back exactly what it names, and other
// requests' units stay counted.
func TestRefundWithinWindow(t *testing.T) {
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			mem, red, set := steppedStores(t, alg, algorithms.PerMinute(10))
			for name, l := range map[string]algorithms.Limiter{"memory": mem, "redis": red} {
				at := start.Add(time.Duration(len(name)) * time.Hour)
				set(at)
				mustAllow(t, l, 4, true) // another request's
				set(at.Add(time.Millisecond))
				mustAllow(t, l, 6, true) // the reservation
				mustAllow(t, l, 1, false)
				set(at.Add(2 * time.Millisecond))
				r, err := l.(algorithms.RateLimiter).Refund(context.Background(), "k", 6, time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				if r.Remaining != 6 {
					t.Errorf("%s: after refund of 6 of 10 used: %+v, want Remaining 6", name, r)
				}
				mustAllow(t, l, 6, true)
				mustAllow(t, l, 1, false)
			}
		})
	}
}
