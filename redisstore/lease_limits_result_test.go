package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// A cold key's requests are one command each, as on the exact store,
// until it is busy (leaseBusy requests), when the last of them asks for
// renewals in pipelines; a busy key's requests
// that find units in every limit's lease send none.
func TestLeasedLimitsRoundTrips(t *testing.T) {
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			counter := &leaseCommands{}
			c := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
			t.Cleanup(func() { _ = c.Close() })
			l, _ := leasedLimitsOn(t, c, alg, twoLimits(alg, 100_000), time.Minute, WithEvictionAllowed())
			for _, p := range l.parts {
				if err := p.script.Load(context.Background(), c).Err(); err != nil {
					t.Fatal(err)
				}
			}
			leaseAllowed(t, l, "warm") // loads the exact path's scripts
			c.AddHook(counter)
			for i := range leaseBusy {
				if !leaseAllowed(t, l, "cold") || counter.single.Load() != int64(i+1) {
					t.Fatalf("a cold key's requests 1 to %d sent %d commands, want %d", i+1, counter.single.Load(), i+1)
				}
				waitLimitsUnseeking(t, l, "cold")
				for j, units := range limitsUnits(l, "cold") {
					if (units > 0) != (i == leaseBusy-1) {
						t.Fatalf("after a cold key's request %d: %d units leased of limit %d", i+1, units, j)
					}
				}
			}
			const requests = 1000
			fromLeases := 0
			for i := range requests {
				units := limitsUnits(l, "busy")
				before := counter.single.Load()
				if !leaseAllowed(t, l, "busy") {
					t.Fatalf("request %d denied", i)
				}
				if sent := counter.single.Load() - before; units[0] > 0 && units[1] > 0 {
					fromLeases++
					if sent != 0 {
						t.Fatalf("request %d, with %v units leased, sent %d commands", i, units, sent)
					}
				}
				waitLimitsUnseeking(t, l, "busy")
			}
			if fromLeases < requests*9/10 {
				t.Errorf("%d of %d requests decided from leases, want at least 90%%", fromLeases, requests)
			}
			t.Logf("%d requests: %d from leases, %d commands alone, %d in pipelines", requests, fromLeases,
				counter.single.Load()-leaseBusy, counter.pipelined.Load())
		})
	}
}

// A request decided from leases reports the binding limit as the exact
// limiter does: the one with the least left (for the odd keys, the
// second, three quarters of it taken), its quota and period, and, with
// one instance, what Redis and the leases have left together.
func TestLeasedLimitsResultBinding(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			const tight, keys = 1000, 2
			prefix := "plres-" + string(alg)
			limits := twoLimits(alg, tight)
			probes := limitProbes(t, addr, prefix, alg, limits)
			takePreUsed(t, probes, limits, keys)
			l, _ := leasedLimitsOn(t, c, alg, limits, time.Minute, WithPrefix(prefix), WithEvictionAllowed())
			for i := range keys {
				key := keyName(i)
				for range leaseBusy { // decided exactly, the last asking for renewals
					leaseAllowed(t, l, key)
				}
				waitLimitsUnseeking(t, l, key)
				before := limitsUnits(l, key)
				res, err := l.Allow(ctx, key, 1)
				if err != nil || !res.Allowed {
					t.Fatalf("%s: %+v, %v", key, res, err)
				}
				if after := limitsUnits(l, key); after[0] != before[0]-1 || after[1] != before[1]-1 {
					t.Fatalf("%s: leases went from %v to %v units: not decided from leases", key, before, after)
				}
				bind := i % 2
				lim := limits[bind]
				left := lim.Capacity() - leaseBusy - 1 // the requests sent, and this one
				if bind == 1 {
					left -= preUsed(i, lim.Rate)
				}
				period := lim.Period
				if alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket {
					period = lim.Period * time.Duration(lim.Capacity()) / time.Duration(lim.Rate)
				}
				if res.Index != bind || res.Limit != lim.Capacity() || res.Period != period || res.ResetAfter <= 0 ||
					res.Remaining < left-1 || res.Remaining > left {
					t.Errorf("%s: %+v, want limit %d (%d), %d left, period %s", key, res, bind, lim.Capacity(), left, period)
				}
			}
		})
	}
}

// Through an outage, a limiter of two limits spends the units leased
// before it (counted in Redis already), and decides a request without
// units in every limit by the failure mode (FailLocal: the twin), as the
// exact limiter does; no renewal is sent meanwhile.
func TestLeasedLimitsOutageFallsBack(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	ls := map[algorithms.Algorithm]*leasedLimits{}
	for _, alg := range leaseAlgorithms {
		l, _ := leasedLimitsOn(t, c, alg, twoLimits(alg, 1000), time.Minute,
			WithPrefix("plout-"+string(alg)), WithEvictionAllowed(), WithTimeout(time.Second))
		for range leaseBusy { // decided exactly, the last asking for renewals
			leaseAllowed(t, l, "held")
		}
		waitLimitsUnseeking(t, l, "held")
		ls[alg] = l
	}
	srv.Stop()
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			l := ls[alg]
			units := limitsUnits(l, "held")
			if units[0] < 1 || units[1] < 1 {
				t.Fatalf("leases of %v units before the outage, want some of each limit", units)
			}
			spent := 0
			for ; spent < min(units[0], units[1]); spent++ {
				res, err := l.Allow(ctx, "held", 1)
				if err != nil || !res.Allowed || res.Decider != algorithms.DecidedByStore {
					t.Fatalf("request %d from leases, Redis stopped: %+v, %v", spent, res, err)
				}
			}
			// The twin decides (whether it admits "held" depends on what
			// Redis last said of it, as on the exact store); a key it
			// admits owes Redis and takes no lease; once the breaker is
			// open, no renewal is sent.
			counter := &leaseCommands{}
			for round := range 2 {
				if round == 1 {
					if l.guard.breaker.Closed() {
						t.Fatal("the breaker is closed after decisions Redis could not make")
					}
					c.AddHook(counter)
				}
				for _, key := range []string{"held", "new", "held", "new"} {
					res, err := l.Allow(ctx, key, 1)
					if err != nil || res.Decider != algorithms.DecidedLocally || key == "new" && !res.Allowed {
						t.Errorf("%s without units, Redis stopped: %+v, %v; want decided by the twin", key, res, err)
					}
				}
				waitLimitsUnseeking(t, l, "new")
				waitLimitsUnseeking(t, l, "held")
			}
			if n := counter.pipelined.Load(); n != 0 {
				t.Errorf("%d commands sent in pipelines (renewals) with the breaker open", n)
			}
			if u := limitsUnits(l, "new"); u[0] != 0 || u[1] != 0 {
				t.Errorf("a key decided by the twin holds leases of %v units", u)
			}
			t.Logf("%d requests from leases leased before the outage", spent)
		})
	}
}
