package middleware

import (
	"net/http"
	"sync"
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
		for _, alg := range algorithms.All() {
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
// a request every 50 ms for 2.5 s. Each admission but the sliding log's
// comes at least a period after the one before it (as the client sees it: from the earlier
// request's start to the later one's end), and the client is served in
// more than one period, not starved. The clients of every store and
// algorithm try side by side, each on its own limiter: the test mostly
// waits between requests, and a late request only widens a gap.
func testCostAfterAboveQuotaOnePerPeriodRedis(t *testing.T, stores []outcomeStore) {
	limit := algorithms.PerSecond(10)
	const span = 2500 * time.Millisecond
	step := limit.Period / time.Duration(limit.Rate) / 2
	var runs []*exportRun
	var wg sync.WaitGroup
	for _, st := range stores[1:] {
		for _, alg := range algorithms.All() {
			r := &exportRun{name: st.name + "/" + string(alg), alg: alg}
			runs = append(runs, r)
			h := &slowHandler{status: http.StatusOK, setCost: 1, costTo: 1000}
			mw := mustNew(t, st.new(alg, limit), WithKeyFunc(headerKey), WithTimeout(5*time.Second), WithCostAfter())(h)
			wg.Go(func() { r.export(mw, step, span) })
		}
	}
	wg.Wait()
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			if r.status != 0 {
				t.Fatalf("status %d", r.status)
			}
			// At most one a period follows from the gaps below.
			if len(r.starts) < 2 {
				t.Errorf("%d exports served in %s; want one a period, at least 2", len(r.starts), span)
			}
			// The sliding counter's windows are fixed in time: it lets the
			// next export through at the same offset into the next window,
			// which this client, trying every step, sees up to a step
			// early.
			least := limit.Period
			if r.alg == algorithms.SlidingWindowCounter {
				least -= step
			}
			if r.alg == algorithms.SlidingWindowLog {
				// The log's charge takes what is left, stamped when the
				// charge lands, a round trip after its request's unit:
				// those units leave the log at their own times, and a
				// request passes as each leaves (docs/shaping.md). In
				// real time no gap is promised.
				return
			}
			for i := 1; i < len(r.starts); i++ {
				if gap := r.ends[i].Sub(r.starts[i-1]); gap < least {
					t.Errorf("export %d served within %s of the one before; want at least %s", i+1, gap, least)
				}
			}
		})
	}
}

// exportRun is one client of testCostAfterAboveQuotaOnePerPeriodRedis:
// when each of its served exports was sent and answered, and the first
// status neither 200 nor 429, if any.
type exportRun struct {
	name         string
	alg          algorithms.Algorithm
	starts, ends []time.Time
	status       int
}

// export sends an export through mw every step for span, and stops at
// the first status neither 200 nor 429.
func (r *exportRun) export(mw http.Handler, step, span time.Duration) {
	began := time.Now()
	for time.Since(began) < span {
		sent := time.Now()
		switch code := get(mw, "/", "exporter").Code; code {
		case http.StatusOK:
			r.starts, r.ends = append(r.starts, sent), append(r.ends, time.Now())
		case http.StatusTooManyRequests:
		default:
			r.status = code
			return
		}
		time.Sleep(time.Until(sent.Add(step)))
	}
}
