package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// leaseAlgorithms are the algorithms WithLeases leases; leaseWindows
// those of windows.
var (
	leaseAlgorithms = []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindowCounter,
		algorithms.TokenBucket, algorithms.LeakyBucket}
	leaseWindows = []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindowCounter}
)

// leaseLimit is rate per hour for the windows, whose window then outlasts
// a test even on a machine loaded many times over, and per day for the
// buckets, which then refill less than a token while a test runs (at
// most 1,000 a day: a token in 86 s).
func leaseLimit(alg algorithms.Algorithm, rate int) algorithms.Limit {
	if alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket {
		return algorithms.Limit{Rate: rate, Period: 24 * time.Hour}
	}
	return algorithms.Limit{Rate: rate, Period: time.Hour}
}

// grant sends a grant of want units under lease id with the request of
// cost (0: a renewal, which decides none, as the lease worker sends).
func (l *leasedLimiter) grant(ctx context.Context, c redis.Scripter, keys []string, id string, cost, want int) *redis.Cmd {
	return l.script.Run(ctx, c, keys, l.grantArgs(id, cost, want)...)
}

// leasedOn returns a leased limiter of alg and lim on a store of c, with
// opts after WithLeases(ttl) and a decision timeout of 10 s (a deadline
// that holds under -race on a busy machine; a test about deadlines sets
// its own), and the store.
func leasedOn(t testing.TB, c redis.UniversalClient, alg algorithms.Algorithm, lim algorithms.Limit, ttl time.Duration, opts ...Option) (*leasedLimiter, *Store) {
	t.Helper()
	s := must(New(c, append([]Option{WithLeases(ttl), WithLogger(quietLogger()), WithTimeout(10 * time.Second)}, opts...)...))
	t.Cleanup(func() { _ = s.Close(closeCtx()) })
	l, err := algorithms.New(s, alg, lim)
	if err != nil {
		t.Fatal(err)
	}
	ll, ok := l.(*leasedLimiter)
	if !ok {
		t.Fatalf("%s: a %T under WithLeases, want a leased limiter", alg, l)
	}
	return ll, s
}

// grantField returns field i (from 0) of a grant's reply.
func grantField(t *testing.T, reply string, i int) string {
	t.Helper()
	f := strings.Fields(reply)
	if len(f) != 7 {
		t.Fatalf("grant reply %q, want 7 fields", reply)
	}
	return f[i]
}

// A grant sent twice under one lease id grants once and answers the same;
// a return sent twice gives back once, at most what was granted; grants
// are capped to what is left divided among the holders plus one.
func TestLeaseScriptOnce(t *testing.T) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
	t.Cleanup(func() { _ = c.Close() })
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			l, _ := leasedOn(t, c, alg, leaseLimit(alg, 100), time.Second, WithPrefix("once-"+string(alg)))
			probe, err := algorithms.New(probeStore(t, c, WithPrefix("once-"+string(alg))), alg, leaseLimit(alg, 100))
			if err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				name       string
				op, id     string
				cost, want int
				reply      string // a grant's granted units, a return's units given back
				used       int    // the key's count in Redis after the step
			}{
				{"grant", "g", "a", 1, 40, "40", 41},
				{"grant sent again", "g", "a", 1, 40, "40", 41},
				{"second holder gets half of what is left", "g", "b", 0, 40, "29", 70},
				{"third holder gets a third", "g", "c", 0, 40, "10", 80},
				{"return", "r", "a", 15, 0, "15", 65},
				{"return sent again", "r", "a", 15, 0, "0", 65},
				{"return above the grant gives back the grant", "r", "b", 1000, 0, "29", 36},
				{"return of an unknown lease", "r", "z", 5, 0, "0", 36},
			}
			for _, st := range steps {
				var got string
				if st.op == "g" {
					reply, err := l.grant(ctx, c, l.leaseKeys("k"), st.id, st.cost, st.want).Text()
					if err != nil {
						t.Fatalf("%s: %v", st.name, err)
					}
					got = grantField(t, reply, 5)
				} else {
					got, err = l.runLease(ctx, c, true, l.leaseKeys("k"), "r", st.id, st.cost).Text()
					if err != nil {
						t.Fatalf("%s: %v", st.name, err)
					}
				}
				if got != st.reply {
					t.Errorf("%s: %s, want %s", st.name, got, st.reply)
				}
				if u := used(t, probe, "k"); u != st.used {
					t.Errorf("%s: the key has used %d, want %d", st.name, u, st.used)
				}
			}
		})
	}
}

// A return whose reply is lost, sent again by go-redis under the same
// lease id, gives back once. (A grant's lost reply:
// TestLeaseLostRenewalCountsOnce.)
func TestLeaseLostReturnCountsOnce(t *testing.T) {
	counts := &dropCounts{}
	proxyAddr, direct := lossyRedis(t, counts)
	c := redis.NewClient(&redis.Options{Addr: proxyAddr, MaxRetries: 3})
	t.Cleanup(func() { _ = c.Close() })
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			prefix := "lost-" + string(alg)
			lim := leaseLimit(alg, 100)
			l, s := leasedOn(t, c, alg, lim, time.Minute, WithPrefix(prefix), WithTimeout(2*time.Second))
			probe, err := algorithms.New(probeStore(t, direct, WithPrefix(prefix)), alg, lim)
			if err != nil {
				t.Fatal(err)
			}
			untilBusy(t, l, "k") // the key's first requests: decided exactly
			busyLease(t, l, "k")
			leased, _ := leaseUnits(l, "k")
			if u := used(t, probe, "k"); leased < 1 || u != leaseBusy+leased {
				t.Fatalf("the key has used %d with %d units leased, want %d (the requests and the lease)", u, leased, leaseBusy+leased)
			}
			dropped := counts.dropped.Load()
			counts.arm(1)
			s.leases.flush()
			counts.arm(0)
			if counts.dropped.Load() != dropped+1 {
				t.Fatalf("the proxy dropped %d replies of the return, want 1", counts.dropped.Load()-dropped)
			}
			if u := used(t, probe, "k"); u != leaseBusy {
				t.Errorf("the key has used %d after its lease's return, want %d (given back once)", u, leaseBusy)
			}
		})
	}
}

// A renewal (a grant of no request, sent by the lease worker in a
// pipeline) whose reply is lost is sent again by go-redis under the same
// lease id: Redis counts its lease once, and the instance holds it.
func TestLeaseLostRenewalCountsOnce(t *testing.T) {
	counts := &dropCounts{}
	proxyAddr, direct := lossyRedis(t, counts)
	c := redis.NewClient(&redis.Options{Addr: proxyAddr, MaxRetries: 3})
	t.Cleanup(func() { _ = c.Close() })
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			prefix := "lostrenewal-" + string(alg)
			lim := leaseLimit(alg, 100)
			l, _ := leasedOn(t, c, alg, lim, time.Minute, WithPrefix(prefix), WithTimeout(2*time.Second))
			probe, err := algorithms.New(probeStore(t, direct, WithPrefix(prefix)), alg, lim)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.script.Load(context.Background(), direct).Err(); err != nil {
				t.Fatal(err)
			}
			// Exactly until the key is busy, then a grant, spent from memory.
			admitted := 0
			for range leaseBusy {
				if leaseAllowed(t, l, "k") {
					admitted++
				}
			}
			waitUnseeking(t, l, "k")
			dropped := counts.dropped.Load()
			counts.arm(1)
			for held, _ := leaseUnits(l, "k"); held > 0; held, _ = leaseUnits(l, "k") {
				if leaseAllowed(t, l, "k") { // the last unit queues the renewal
					admitted++
				}
			}
			waitUnseeking(t, l, "k")
			counts.arm(0)
			if counts.dropped.Load() != dropped+1 {
				t.Fatalf("the proxy dropped %d replies, want 1 (the renewal's)", counts.dropped.Load()-dropped)
			}
			held, _ := leaseUnits(l, "k")
			if u := used(t, probe, "k"); held < 1 || u != admitted+held {
				t.Errorf("the key has used %d with %d admitted and %d units held, want a renewal held and counted once", u, admitted, held)
			}
		})
	}
}

// A grant's fair share counts stores, not leases: a store that renewed
// its leases of a key three times is one holder (its latest lease's end
// keeps it one), a return of its older lease leaves it a holder, and the
// return of its latest ends it.
func TestLeaseFairShareCountsStores(t *testing.T) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
	t.Cleanup(func() { _ = c.Close() })
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			prefix := "fair-" + string(alg)
			l, _ := leasedOn(t, c, alg, leaseLimit(alg, 100), time.Minute, WithPrefix(prefix))
			probe, err := algorithms.New(probeStore(t, c, WithPrefix(prefix)), alg, leaseLimit(alg, 100))
			if err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				name, op, id string
				want         int
				reply        string // a grant's granted units, a return's units given back
				used         int
			}{
				{"store A's first lease", "g", "LA.1", 10, "10", 10},
				{"A renews: still the only holder", "g", "LA.2", 10, "10", 20},
				{"A renews again", "g", "LA.3", 10, "10", 30},
				{"B shares what is left with A alone", "g", "LB.1", 40, "35", 65},
				{"A gives back its first lease, spent", "r", "LA.1", 0, "0", 65},
				{"C shares with A and B", "g", "LC.1", 40, "11", 76},
				{"A gives back its latest lease, spent", "r", "LA.3", 0, "0", 76},
				{"D shares with B and C", "g", "LD.1", 40, "8", 84},
			}
			for _, st := range steps {
				var got string
				if st.op == "g" {
					reply, err := l.grant(ctx, c, l.leaseKeys("k"), st.id, 0, st.want).Text()
					if err != nil {
						t.Fatalf("%s: %v", st.name, err)
					}
					got = grantField(t, reply, 5)
				} else if got, err = l.runLease(ctx, c, true, l.leaseKeys("k"), "r", st.id, 0).Text(); err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				if got != st.reply {
					t.Errorf("%s: %s, want %s", st.name, got, st.reply)
				}
				if u := used(t, probe, "k"); u != st.used {
					t.Errorf("%s: the key has used %d, want %d", st.name, u, st.used)
				}
			}
		})
	}
}
