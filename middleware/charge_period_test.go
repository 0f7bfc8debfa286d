package middleware

import (
	"net/http"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/redisstore"
)

// periodStart is where the clock-controlled tests of this file begin.
var periodStart = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)

// A client that tries every Period/Rate/2 with an export that sets a cost
// far above the quota gets exactly one request in each period, on every
// algorithm: the buckets as well, whose debt then takes a whole period to
// refill, rather than Rate requests a period, one per unit refilled. The
// clock is the test's: the memory store, and the scripts in miniredis,
// whose clock follows it. Four periods, one request each.
func TestCostAfterAboveQuotaOnePerPeriod(t *testing.T) {
	limit := algorithms.PerMinute(10)
	const periods = 4
	step := limit.Period / time.Duration(limit.Rate) / 2
	for _, st := range []string{"memory", "scripts"} {
		for _, alg := range algorithms.Algorithms {
			t.Run(st+"/"+string(alg), func(t *testing.T) {
				t.Parallel()
				clock := storetest.NewManualClock(periodStart)
				advance := func(d time.Duration) { clock.Advance(d) }
				var store algorithms.Store = must(memstore.New(memstore.WithClock(clock.Now)))
				if st == "scripts" {
					m := miniredis.RunT(t)
					m.SetTime(periodStart)
					c := redis.NewClient(&redis.Options{Addr: m.Addr()})
					t.Cleanup(func() { _ = c.Close() })
					store = must(redisstore.New(c, redisstore.WithClock(clock.Now), redisstore.WithTimeout(time.Minute)))
					advance = func(d time.Duration) {
						clock.Advance(d)
						m.SetTime(clock.Now())
						m.FastForward(d)
					}
				}
				lim := newLimiter(t, store, alg, limit)
				h := &slowHandler{status: http.StatusOK, setCost: 1, costTo: 1000}
				mw := mustNew(t, lim, WithKeyFunc(headerKey), WithClock(clock.Now), WithTimeout(time.Minute), WithCostAfter())(h)
				var served [periods]int
				for at := time.Duration(0); at < periods*limit.Period; at += step {
					if code := get(mw, "/", "exporter").Code; code == http.StatusOK {
						served[at/limit.Period]++
					} else if code != http.StatusTooManyRequests {
						t.Fatalf("at %s: status %d", at, code)
					}
					advance(step)
				}
				if served != [periods]int{1, 1, 1, 1} {
					t.Errorf("served per period %v; want one export in each", served)
				}
			})
		}
	}
}

// The same on Redis and on Cluster, in real time: a limit of 10 a second,
// a request every 50 ms for 2.5 s. Each admission comes at least a period
// after the one before it (as the client sees it: from the earlier
// request's start to the later one's end), and the client is served in
// more than one period, not starved.
func TestCostAfterAboveQuotaOnePerPeriodRedis(t *testing.T) {
	limit := algorithms.PerSecond(10)
	const span = 2500 * time.Millisecond
	step := limit.Period / time.Duration(limit.Rate) / 2
	for _, st := range outcomeStores(t)[1:] {
		for _, alg := range algorithms.Algorithms {
			t.Run(st.name+"/"+string(alg), func(t *testing.T) {
				t.Parallel()
				lim := st.new(alg, limit)
				h := &slowHandler{status: http.StatusOK, setCost: 1, costTo: 1000}
				mw := mustNew(t, lim, WithKeyFunc(headerKey), WithTimeout(5*time.Second), WithCostAfter())(h)
				var starts, ends []time.Time
				began := time.Now()
				for time.Since(began) < span {
					sent := time.Now()
					code := get(mw, "/", "exporter").Code
					switch code {
					case http.StatusOK:
						starts, ends = append(starts, sent), append(ends, time.Now())
					case http.StatusTooManyRequests:
					default:
						t.Fatalf("status %d", code)
					}
					time.Sleep(time.Until(sent.Add(step)))
				}
				// At most one a period follows from the gaps below.
				if len(starts) < 2 {
					t.Errorf("%d exports served in %s; want one a period, at least 2", len(starts), span)
				}
				// The sliding counter's windows are fixed in time: it lets the
				// next export through at the same offset into the next window,
				// which this client, trying every step, sees up to a step
				// early.
				least := limit.Period
				if alg == algorithms.SlidingWindowCounter {
					least -= step
				}
				for i := 1; i < len(starts); i++ {
					if gap := ends[i].Sub(starts[i-1]); gap < least {
						t.Errorf("export %d served within %s of the one before; want at least %s", i+1, gap, least)
					}
				}
			})
		}
	}
}
