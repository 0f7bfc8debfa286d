package faults

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// Three instances (separate clients, WithInstances(3)) share 100 an hour
// on one key; a fault (CLIENT PAUSE, SIGSTOP, a kill and a restart that
// forgets) begins, and 5 ms into it a flood from all three
// begins and lasts until 1.5 s after the fault. Whatever each instance's
// twin admits is charged to Redis, and it starts from what Redis last said
// (the requests before the fault went through every instance): at most the
// limit plus one per instance is admitted over the hour, plus what a
// restarted server forgot. For every algorithm (make test: every fault
// under the fixed window, and each other algorithm under two faults that
// follow traffic, the restart that forgets and, in turn, the pause or
// the freeze that does not; make test-scale: all of them).
func TestChargesAcrossInstances(t *testing.T) {
	const rate, instances = 100, 3
	// Each fault begins before it returns (so that the flood cannot
	// outrun it on a loaded machine) and returns what ends it.
	pause := func(t *testing.T, _ *redistest.Server, admin *redis.Client) func() {
		if err := admin.Do(context.Background(), "CLIENT", "PAUSE", "200", "ALL").Err(); err != nil {
			t.Error(err)
		}
		return func() { time.Sleep(200 * time.Millisecond) }
	}
	restart := func(_ *testing.T, srv *redistest.Server, _ *redis.Client) func() {
		srv.Kill()
		return func() {
			time.Sleep(200 * time.Millisecond)
			srv.Restart()
		}
	}
	freeze := func(_ *testing.T, srv *redistest.Server, _ *redis.Client) func() {
		srv.Freeze()
		return func() {
			time.Sleep(200 * time.Millisecond)
			srv.Thaw()
		}
	}
	faults := []struct {
		name    string
		before  int
		forgets bool // the fault loses what Redis counted before it
		fault   func(t *testing.T, srv *redistest.Server, admin *redis.Client) (end func())
	}{
		{"pause", 0, false, pause},
		{"pause after 60", 60, false, pause},
		{"sleep after 60", 60, false, freeze},
		{"restart", 0, true, restart},
		{"restart after 30", 30, true, restart},
	}
	for ai, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindowLog,
		algorithms.SlidingWindowCounter, algorithms.TokenBucket, algorithms.LeakyBucket} {
		for fi, f := range faults {
			if !fullMatrix() && ai != 0 && !chargedFault(ai, fi, f.before, f.forgets) {
				continue
			}
			t.Run(string(alg)+"/"+f.name, func(t *testing.T) {
				srv := redistest.StartServer(t)
				admin := newClient(t, clientKinds[1], srv.Addr)
				var ls []algorithms.Limiter
				for range instances {
					store := must(redisstore.New(newClient(t, clientKinds[0], srv.Addr),
						redisstore.WithLogger(quiet), redisstore.WithInstances(instances)))
					l, err := algorithms.New(store, alg, algorithms.Limit{Rate: rate, Period: time.Hour})
					if err != nil {
						t.Fatal(err)
					}
					ls = append(ls, l)
				}
				for i := range f.before {
					res, err := ls[i%instances].Allow(context.Background(), "k", 1)
					if err != nil || !res.Allowed || res.Decider != algorithms.DecidedByStore {
						t.Fatalf("request %d before the fault: %+v %v", i, res, err)
					}
				}
				admitted, local := floodAcross(t, ls, func() func() { return f.fault(t, srv, admin) })
				time.Sleep(300 * time.Millisecond) // the last charges are sent
				want := rate + instances
				if f.forgets {
					want += f.before
				}
				total := f.before + admitted
				t.Logf("admitted %d (%d locally) after %d before the fault", admitted, local, f.before)
				if local == 0 {
					t.Fatal("nothing was decided locally: the fault did not show")
				}
				if total > want {
					t.Errorf("%d admitted over the hour, want at most %d", total, want)
				}
			})
		}
	}
}

// chargedFault reports whether make test runs the fault of index fi
// (after before requests; forgets: a restart) under the algorithm of
// index ai > 0: one that follows traffic and forgets, and one that
// follows traffic and does not, the pause (index 1) and the freeze
// (index 2) in turn.
func chargedFault(ai, fi, before int, forgets bool) bool {
	if before == 0 {
		return false
	}
	return forgets || fi == 1+ai%2
}

// floodAcross begins a fault (begin returns once it has begun, with what
// ends it) and, from 5 ms into it until 1.5 s after it ended, 150 clients
// each ask every 20 ms through the limiters in turn; it returns how many
// were admitted, and how many of those locally.
func floodAcross(t *testing.T, ls []algorithms.Limiter, begin func() (end func())) (admitted, local int) {
	var allowed, byTwin atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	faultDone := make(chan struct{})
	end := begin()
	go func() {
		defer close(faultDone)
		end()
	}()
	time.Sleep(5 * time.Millisecond)
	for c := range 150 {
		wg.Go(func() {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				res, err := ls[c%len(ls)].Allow(context.Background(), "k", 1)
				if err != nil {
					t.Error(err)
					return
				}
				if res.Allowed {
					allowed.Add(1)
					if res.Decider == algorithms.DecidedLocally {
						byTwin.Add(1)
					}
				}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		})
	}
	<-faultDone
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	return int(allowed.Load()), int(byTwin.Load())
}
