package redisstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// faultClients is how many clients (each its own key, limit 1) are in
// flight during the fault.
const faultClients = 20

// The measured fault: limit 1, lease 1 min, 20 clients in flight while
// Redis is paused (CLIENT PAUSE) or frozen (SIGSTOP) for a second, with
// go-redis's default client, the recommended one (ContextTimeoutEnabled,
// which gives up on a call at its deadline) and one whose short reads send
// calls again in the fault, copies that a frozen Redis runs once it
// resumes. Whether the leases were taken before the
// fault or stand in for calls the fault left unanswered, and whether they
// are released in the fault or after it, within a second of Redis
// answering again no lease of theirs is left in Redis, and each client's
// next Acquire that Redis decides is granted.
func TestConcurrencyLeasesReleasedAfterFault(t *testing.T) {
	clients := map[string]redis.Options{
		"default":     {},
		"recommended": {ContextTimeoutEnabled: true},
		"short-reads": {ReadTimeout: 200 * time.Millisecond}, // calls sent again in the fault
	}
	for i, client := range []string{"default", "recommended", "short-reads"} {
		for j, fault := range []string{"pause", "freeze"} {
			for k, tc := range []struct {
				name          string
				before, after bool // acquire before the fault; release after it
			}{
				{"held-before/released-in-fault", true, false},
				{"stand-in/released-in-fault", false, false},
				{"stand-in/released-after", false, true},
			} {
				if !wholeMatrix() && (i+j+k)%3 != 0 {
					continue // make test: 6 of 18, each client, fault and case
				}
				t.Run(client+"/"+fault+"/"+tc.name, func(t *testing.T) {
					testLeasesAfterFault(t, clients[client], fault, tc.before, tc.after)
				})
			}
		}
	}
}

func testLeasesAfterFault(t *testing.T, opts redis.Options, fault string, before, after bool) {
	srv := redistest.StartServer(t)
	opts.Addr = srv.Addr
	c := redis.NewClient(&opts)
	defer c.Close()
	direct := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer direct.Close()
	st := must(New(c, WithLogger(quietLogger())))
	defer st.Close(closeCtx())
	l := mustConcurrency(t, st, 1, time.Minute)
	ctx := context.Background()
	for i := range faultClients { // loads the script and fills the pool
		if err := mustAcquire(t, l, clientKey(i)).Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var leases []*algorithms.Lease
	if before {
		leases = acquireAll(t, l, algorithms.DecidedByStore)
	}
	ended := startFault(t, srv, fault)
	if !before {
		leases = acquireAll(t, l, algorithms.DecidedLocally)
	}
	if !after {
		releaseAll(leases)
	}
	answering := <-ended
	if after {
		releaseAll(leases)
	}
	var held []string
	for i := range faultClients {
		held = append(held, leasesGone(t, direct, "rl:{"+clientKey(i)+"}:cc", time.Until(answering.Add(time.Second)))...)
	}
	gone := time.Since(answering).Round(time.Millisecond)
	refused := refusedAfter(t, l)
	t.Logf("%d of %d leases held in Redis a second after it answered again (checked until %s after); %d of %d acquires refused by Redis",
		len(held), faultClients, gone, refused, faultClients)
	if len(held) != 0 || refused != 0 {
		t.Errorf("%d leases held in Redis, %d acquires refused after the fault; want none", len(held), refused)
	}
}

// leasesGone waits up to within for the lease set to be empty, reading it
// directly, and returns the leases it still holds.
func leasesGone(t *testing.T, direct *redis.Client, set string, within time.Duration) []string {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		held, err := direct.ZRange(context.Background(), set, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(held) == 0 || time.Now().After(deadline) {
			return held
		}
	}
}

func clientKey(i int) string { return fmt.Sprintf("client-%d", i) }

// startFault pauses or freezes Redis for a second; the channel tells when
// Redis answers again.
func startFault(t *testing.T, srv *redistest.Server, fault string) <-chan time.Time {
	t.Helper()
	if fault == "pause" {
		if _, err := srv.Do("CLIENT", "PAUSE", "1000", "ALL"); err != nil {
			t.Fatal(err)
		}
	} else {
		srv.Freeze()
		t.Cleanup(srv.Thaw)
		time.AfterFunc(time.Second, srv.Thaw)
	}
	ended := make(chan time.Time, 1)
	go func() {
		time.Sleep(900 * time.Millisecond)
		for {
			if _, err := srv.Do("PING"); err == nil {
				ended <- time.Now()
				return
			}
		}
	}()
	return ended
}

// acquireAll acquires each client's key at once and wants every lease
// allowed by want.
func acquireAll(t *testing.T, l algorithms.ConcurrencyLimiter, want algorithms.Decider) []*algorithms.Lease {
	t.Helper()
	leases := make([]*algorithms.Lease, faultClients)
	var wg sync.WaitGroup
	for i := range leases {
		wg.Go(func() {
			lease, err := l.Acquire(context.Background(), clientKey(i))
			if err != nil || !lease.Allowed || lease.Decider != want {
				t.Errorf("client %d: %+v, %v; want allowed by %s", i, lease, err, want)
			}
			leases[i] = lease
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return leases
}

func releaseAll(leases []*algorithms.Lease) {
	var wg sync.WaitGroup
	for _, lease := range leases {
		wg.Go(func() { _ = lease.Release(context.Background()) })
	}
	wg.Wait()
}

// refusedAfter counts the clients whose next Acquire that Redis decides
// (once the breaker lets calls through again) is refused.
func refusedAfter(t *testing.T, l algorithms.ConcurrencyLimiter) int {
	t.Helper()
	refused := 0
	for i := range faultClients {
		for deadline := time.Now().Add(3 * time.Second); ; {
			lease := mustAcquire(t, l, clientKey(i))
			_ = lease.Release(context.Background())
			if lease.Decider == algorithms.DecidedByStore {
				if !lease.Allowed {
					refused++
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("client %d: still decided by %s 3 s after the fault", i, lease.Decider)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return refused
}
