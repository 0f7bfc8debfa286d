package redisstore

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
)

// chargeRetry bounds the RetryAfter of a request of cost 1 right after a
// charge emptied a quota of 10 per hour: a window waits for its end (the
// sliding window counter for a tenth of the next one too, when the
// current count has faded enough); a bucket for one unit, six minutes,
// when the charge took what was left, and for a whole burst, an hour,
// when it asked for more and so left the bucket in debt.
func chargeRetry(alg algorithms.Algorithm, debt bool) [2]time.Duration {
	switch {
	case alg == algorithms.SlidingWindowCounter:
		return [2]time.Duration{65 * time.Minute, 66 * time.Minute}
	case alg.CanReserve() && !debt:
		return [2]time.Duration{5 * time.Minute, 6 * time.Minute}
	}
	return [2]time.Duration{59 * time.Minute, time.Hour}
}

// A charge within what is left takes exactly its cost; one above it takes
// what is left, and one above the quota the whole quota, so the next
// request is refused, with a RetryAfter until a unit comes back; a bucket
// asked for more than it has goes into debt, and the next request waits
// for a whole burst to refill. Every algorithm, on memory, Redis and
// Cluster.
func TestChargeTakesWhatIsLeft(t *testing.T) {
	ctx := context.Background()
	stores := testStores(t) // one set for every algorithm: the keys differ
	for _, alg := range algorithms.All() {
		for _, store := range stores {
			for _, tc := range []struct {
				name     string
				before   int // admitted before the charge
				charge   int
				wantLeft int // Remaining after the charge
			}{
				{"within", 3, 4, 3},
				{"all that is left", 3, 7, 0},
				{"above what is left", 3, 20, 0},
				{"above the quota", 0, 1000, 0},
			} {
				t.Run(string(alg)+"/"+store.name+"/"+tc.name, func(t *testing.T) {
					l, err := algorithms.New(store.store, alg, algorithms.PerHour(10))
					if err != nil {
						t.Fatal(err)
					}
					key := t.Name()
					if tc.before > 0 {
						if r, err := l.Allow(ctx, key, tc.before); err != nil || !r.Allowed {
							t.Fatalf("allow %d: %+v, %v", tc.before, r, err)
						}
					}
					r, err := l.Charge(ctx, key, tc.charge)
					if err != nil {
						t.Fatal(err)
					}
					// A bucket in debt refuses even a request of cost 0.
					debt := alg.CanReserve() && tc.before+tc.charge > 10
					if r.Allowed == debt || r.Remaining != tc.wantLeft || r.Limit != 10 {
						t.Fatalf("charge of %d: %+v; want Remaining %d of 10, allowed %v", tc.charge, r, tc.wantLeft, !debt)
					}
					// Exactly what is left passes, one at a time, and no more.
					for i := range tc.wantLeft + 1 {
						res, err := l.Allow(ctx, key, 1)
						if err != nil {
							t.Fatal(err)
						}
						if res.Allowed != (i < tc.wantLeft) {
							t.Fatalf("request %d after the charge: %+v; want %d to pass", i+1, res, tc.wantLeft)
						}
						if !res.Allowed {
							if b := chargeRetry(alg, debt); res.RetryAfter < b[0] || res.RetryAfter > b[1] {
								t.Errorf("RetryAfter %s, want within [%s, %s]", res.RetryAfter, b[0], b[1])
							}
						}
					}
				})
			}
		}
	}
}

// With several limits each takes what it can: the one with less left is
// emptied, the other takes the whole cost.
func TestChargeSeveralLimits(t *testing.T) {
	ctx := context.Background()
	short, long := algorithms.PerMinute(10), algorithms.PerHour(30)
	stores := testStores(t) // one set for every algorithm: the keys differ
	for _, alg := range algorithms.All() {
		for _, store := range stores {
			t.Run(string(alg)+"/"+store.name, func(t *testing.T) {
				both, err := algorithms.New(store.store, alg, short, long)
				if err != nil {
					t.Fatal(err)
				}
				key := t.Name()
				if r, err := both.Allow(ctx, key, 5); err != nil || !r.Allowed {
					t.Fatalf("allow 5: %+v, %v", r, err)
				}
				r, err := both.Charge(ctx, key, 8)
				if err != nil || r.Remaining != 0 || r.Index != 0 {
					t.Fatalf("charge of 8: %+v, %v; want the short limit emptied", r, err)
				}
				// Limiters of one limit share its state per key.
				for _, tc := range []struct {
					limit algorithms.Limit
					want  algorithms.Result // of a Peek: a request of cost 1
				}{
					{short, algorithms.Result{Allowed: false, Remaining: 0}},
					{long, algorithms.Result{Allowed: true, Remaining: 30 - 5 - 8 - 1}},
				} {
					one, err := algorithms.New(store.store, alg, tc.limit)
					if err != nil {
						t.Fatal(err)
					}
					p, err := one.Peek(ctx, key)
					if err != nil {
						t.Fatal(err)
					}
					if p.Allowed != tc.want.Allowed || p.Remaining != tc.want.Remaining {
						t.Errorf("%s after the charge: %+v; want allowed %v, Remaining %d",
							tc.limit, p, tc.want.Allowed, tc.want.Remaining)
					}
				}
			})
		}
	}
}

func TestChargeBadInput(t *testing.T) {
	ctx := context.Background()
	for _, store := range testStores(t) {
		l, err := algorithms.New(store.store, algorithms.FixedWindow, algorithms.PerSecond(10))
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			key  string
			cost int
			want error
		}{
			{"zero cost", "k", 0, algorithms.ErrInvalidCost},
			{"negative cost", "k", -5, algorithms.ErrInvalidCost},
			{"empty key", "", 1, algorithms.ErrInvalidKey},
		} {
			if _, err := l.Charge(ctx, tc.key, tc.cost); !errors.Is(err, tc.want) {
				t.Errorf("%s/%s: err %v, want %v", store.name, tc.name, err, tc.want)
			}
		}
	}
}

// A charge whose reply is lost, which go-redis then sends again, is made
// once.
func TestLostChargeReplyCountsOnce(t *testing.T) {
	counts := &dropCounts{}
	proxyAddr, direct := lossyRedis(t, counts)
	c := redis.NewClient(&redis.Options{Addr: proxyAddr})
	defer c.Close()
	ctx := context.Background()
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			prefix := "charge-once-" + string(alg)
			l, err := algorithms.New(must(New(c, WithPrefix(prefix), WithTimeout(time.Second))), alg, onceLimit)
			if err != nil {
				t.Fatal(err)
			}
			probe, err := algorithms.New(must(New(direct, WithPrefix(prefix), WithTimeout(5*time.Second))), alg, onceLimit)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := probe.Peek(ctx, "k"); err != nil { // loads the script
				t.Fatal(err)
			}
			dropped := counts.dropped.Load()
			counts.arm(1)
			_, err = l.Charge(ctx, "k", 7)
			counts.arm(0)
			if err != nil {
				t.Fatal(err)
			}
			if counts.dropped.Load() != dropped+1 {
				t.Fatalf("the proxy dropped %d replies, want 1", counts.dropped.Load()-dropped)
			}
			if got := used(t, probe, "k"); got != 7 {
				t.Errorf("Redis counted %d, want the charge of 7 once", got)
			}
		})
	}
}

// A charge Redis cannot answer fails, wrapped, and so does one the breaker
// keeps from Redis (a refused dial opened it); under FailLocal the local
// twin takes it, so the decisions it makes while Redis is away count it.
func TestChargeRedisDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens here now
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * ms})
	defer client.Close()
	ctx := context.Background()
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			l, err := algorithms.New(must(New(client, WithTimeout(time.Second))), alg, algorithms.PerHour(10))
			if err != nil {
				t.Fatal(err)
			}
			if r, err := l.Allow(ctx, "k", 1); err != nil || !r.Allowed || r.Decider != algorithms.DecidedLocally {
				t.Fatalf("first request: %+v, %v; want a local admission", r, err)
			}
			var opErr *net.OpError
			if _, err := l.Charge(ctx, "k", 1000); !errors.As(err, &opErr) && !errors.Is(err, errBreakerOpen) {
				t.Fatalf("charge: err %v, want Redis's error or the open breaker's, wrapped", err)
			}
			if r, err := l.Allow(ctx, "k", 1); err != nil || r.Allowed || r.Decider != algorithms.DecidedLocally {
				t.Errorf("after the failed charge: %+v, %v; want the twin to refuse", r, err)
			}
		})
	}
}
