package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
)

func TestNewRefusesBadInput(t *testing.T) {
	mem := must(memstore.New())
	tests := []struct {
		name   string
		store  algorithms.Store
		alg    algorithms.Algorithm
		limits []algorithms.Limit
		want   error
	}{
		{"unknown algorithm", mem, "lottery", []algorithms.Limit{algorithms.PerSecond(1)}, algorithms.ErrUnknownAlgorithm},
		{"empty algorithm", mem, "", []algorithms.Limit{algorithms.PerSecond(1)}, algorithms.ErrUnknownAlgorithm},
		{"no limits", mem, algorithms.FixedWindow, nil, algorithms.ErrInvalidLimit},
		{"zero rate", mem, algorithms.FixedWindow, []algorithms.Limit{{Rate: 0, Period: time.Second}}, algorithms.ErrInvalidLimit},
		{"negative rate", mem, algorithms.FixedWindow, []algorithms.Limit{{Rate: -1, Period: time.Second}}, algorithms.ErrInvalidLimit},
		{"zero period", mem, algorithms.FixedWindow, []algorithms.Limit{{Rate: 1}}, algorithms.ErrInvalidLimit},
		{"negative period", mem, algorithms.TokenBucket, []algorithms.Limit{{Rate: 1, Period: -time.Second}}, algorithms.ErrInvalidLimit},
		{"period under a millisecond", mem, algorithms.TokenBucket, []algorithms.Limit{{Rate: 1, Period: 999 * time.Microsecond}}, algorithms.ErrInvalidLimit},
		{"period with nanoseconds", mem, algorithms.TokenBucket, []algorithms.Limit{{Rate: 1, Period: time.Second + 1}}, algorithms.ErrInvalidLimit},
		{"negative burst", mem, algorithms.TokenBucket, []algorithms.Limit{{Rate: 1, Period: time.Second, Burst: -1}}, algorithms.ErrInvalidLimit},
		{"rate over algorithms.MaxRate", mem, algorithms.LeakyBucket, []algorithms.Limit{{Rate: algorithms.MaxRate + 1, Period: 24 * time.Hour}}, algorithms.ErrInvalidLimit},
		{"fixed window rate 2^53+1", mem, algorithms.FixedWindow, []algorithms.Limit{{Rate: 1<<53 + 1, Period: time.Second}}, algorithms.ErrInvalidLimit},
		{"fixed window rate MaxInt", mem, algorithms.FixedWindow, []algorithms.Limit{{Rate: math.MaxInt, Period: time.Second}}, algorithms.ErrInvalidLimit},
		{"counter rate MaxInt", mem, algorithms.SlidingWindowCounter, []algorithms.Limit{{Rate: math.MaxInt, Period: time.Second}}, algorithms.ErrInvalidLimit},
		{"bucket rate MaxInt burst 2", mem, algorithms.TokenBucket, []algorithms.Limit{{Rate: math.MaxInt, Period: time.Second, Burst: 2}}, algorithms.ErrInvalidLimit},
		{"burst over algorithms.MaxRate", mem, algorithms.LeakyBucket, []algorithms.Limit{{Rate: 1, Period: time.Millisecond, Burst: algorithms.MaxRate + 1}}, algorithms.ErrInvalidLimit},
		{"burst MaxInt", mem, algorithms.TokenBucket, []algorithms.Limit{{Rate: 1, Period: time.Second, Burst: math.MaxInt}}, algorithms.ErrInvalidLimit},
		{"refill over algorithms.MaxRefill", mem, algorithms.LeakyBucket, []algorithms.Limit{{Rate: 1, Period: algorithms.MaxPeriod, Burst: 101}}, algorithms.ErrInvalidLimit},
		{"period over a year", mem, algorithms.FixedWindow, []algorithms.Limit{{Rate: 1, Period: algorithms.MaxPeriod + time.Second}}, algorithms.ErrInvalidLimit},
		{"sliding log rate over its cap", mem, algorithms.SlidingWindowLog, []algorithms.Limit{{Rate: algorithms.MaxSlidingLogRate + 1, Period: time.Hour}}, algorithms.ErrInvalidLimit},
		{"bucket refilling in 164 years", mem, algorithms.TokenBucket, []algorithms.Limit{{Rate: 1, Period: 24 * time.Hour, Burst: 60_000}}, algorithms.ErrInvalidLimit},
		{"the same limit twice", mem, algorithms.TokenBucket, []algorithms.Limit{algorithms.PerSecond(10), algorithms.PerSecond(10)}, algorithms.ErrInvalidLimit},
		{"limits a window treats as one", mem, algorithms.FixedWindow, []algorithms.Limit{algorithms.PerSecond(10), algorithms.PerSecond(10).WithBurst(20)}, algorithms.ErrInvalidLimit},
		{"one bad limit of two", mem, algorithms.SlidingWindowLog, []algorithms.Limit{algorithms.PerSecond(1), {Rate: 0, Period: time.Second}}, algorithms.ErrInvalidLimit},
		{"nil store", nil, algorithms.FixedWindow, []algorithms.Limit{algorithms.PerSecond(1)}, algorithms.ErrInvalidOption},
		{"typed nil memory store", (*memstore.Store)(nil), algorithms.FixedWindow, []algorithms.Limit{algorithms.PerSecond(1)}, algorithms.ErrInvalidOption},
		{"typed nil redis store", (*Store)(nil), algorithms.FixedWindow, []algorithms.Limit{algorithms.PerSecond(1)}, algorithms.ErrInvalidOption},
		{"zero memory store", &memstore.Store{}, algorithms.FixedWindow, []algorithms.Limit{algorithms.PerSecond(1)}, algorithms.ErrInvalidOption},
		{"zero redis store", &Store{}, algorithms.FixedWindow, []algorithms.Limit{algorithms.PerSecond(1)}, algorithms.ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := algorithms.New(tt.store, tt.alg, tt.limits...)
			if !errors.Is(err, tt.want) || l != nil {
				t.Fatalf("New: (%v, %v), want error %v", l, err, tt.want)
			}
		})
	}
}

// New refuses what it cannot use (an invalid option, a nil client) with an
// error wrapping algorithms.ErrInvalidOption, and returns no store.
func TestNewRefusesInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		new  func() error
	}{
		{"nil clock", func() error { _, err := memstore.New(memstore.WithClock(nil)); return err }},
		{"prefix with a brace", func() error { _, err := New(redisClientNeverUsed(), WithPrefix("a{b")); return err }},
		{"empty prefix", func() error { _, err := New(redisClientNeverUsed(), WithPrefix("")); return err }},
		{"nil redis client", func() error { _, err := New(nil); return err }},
		{"zero sweep interval", func() error { _, err := memstore.New(memstore.WithSweepInterval(0)); return err }},
		{"max keys zero", func() error { _, err := memstore.New(memstore.WithMaxKeys(0)); return err }},
		{"max keys negative", func() error { _, err := memstore.New(memstore.WithMaxKeys(-1)); return err }},
		{"max keys under 1024", func() error { _, err := memstore.New(memstore.WithMaxKeys(1023)); return err }},
		{"nil memory store option", func() error { _, err := memstore.New(memstore.WithClock(time.Now), nil); return err }},
		{"nil redis store option", func() error { _, err := New(redisClientNeverUsed(), nil); return err }},
		{"typed nil redis client", func() error { _, err := New((*redis.Client)(nil)); return err }},
		{"typed nil cluster client", func() error { _, err := New((*redis.ClusterClient)(nil)); return err }},
		{"typed nil observer", func() error { _, err := New(redisClientNeverUsed(), WithObserver((*nilObserver)(nil))); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.new(); !errors.Is(err, algorithms.ErrInvalidOption) {
				t.Fatalf("New: %v, want an error wrapping %v", err, algorithms.ErrInvalidOption)
			}
		})
	}
}

func TestAllowRefusesBadRequests(t *testing.T) {
	for _, alg := range algorithms.All() {
		l, err := algorithms.New(must(memstore.New()), alg, algorithms.Limit{Rate: 5, Period: time.Second, Burst: 3}, algorithms.PerMinute(4))
		if err != nil {
			t.Fatal(err)
		}
		bucket := alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket
		tests := []struct {
			key  string
			cost int
			want error
		}{
			{"", 1, algorithms.ErrInvalidKey},
			{strings.Repeat("k", algorithms.MaxKeyLength+1), 1, algorithms.ErrInvalidKey},
			{"k", 0, algorithms.ErrInvalidCost},
			{"k", -3, algorithms.ErrInvalidCost},
			{"k", 6, algorithms.ErrCostExceedsLimit},
			{"k", 5, algorithms.ErrCostExceedsLimit}, // the per-minute limit holds 4
		}
		if bucket {
			tests = append(tests, struct {
				key  string
				cost int
				want error
			}{"k", 4, algorithms.ErrCostExceedsLimit}) // the bucket holds 3
		}
		for _, tt := range tests {
			r, err := l.Allow(context.Background(), tt.key, tt.cost)
			if !errors.Is(err, tt.want) || r.Allowed {
				t.Errorf("%s: Allow(len %d, cost %d) = (%+v, %v), want error %v", alg, len(tt.key), tt.cost, r, err, tt.want)
			}
		}
		// The longest key is fine, and nothing above consumed anything.
		r, err := l.Allow(context.Background(), strings.Repeat("k", algorithms.MaxKeyLength), 1)
		if err != nil || !r.Allowed {
			t.Errorf("%s: longest key: (%+v, %v)", alg, r, err)
		}
		r, err = l.Allow(context.Background(), "k", 3)
		if err != nil || !r.Allowed {
			t.Errorf("%s: full cost after refused requests: (%+v, %v)", alg, r, err)
		}
	}
}

// Limits just inside the bounds are accepted by every algorithm that
// takes them.
func TestNewAcceptsLimitsAtTheBounds(t *testing.T) {
	tests := []struct {
		alg   algorithms.Algorithm
		limit algorithms.Limit
	}{
		{algorithms.FixedWindow, algorithms.Limit{Rate: algorithms.MaxRate, Period: algorithms.MaxPeriod}},
		{algorithms.SlidingWindowLog, algorithms.Limit{Rate: algorithms.MaxSlidingLogRate, Period: time.Hour}},
		{algorithms.SlidingWindowCounter, algorithms.Limit{Rate: algorithms.MaxRate, Period: algorithms.MaxPeriod}},
		{algorithms.TokenBucket, algorithms.Limit{Rate: algorithms.MaxRate, Period: algorithms.MaxPeriod, Burst: algorithms.MaxRate}},
		{algorithms.LeakyBucket, algorithms.Limit{Rate: 1, Period: algorithms.MaxPeriod, Burst: 99}},
		{algorithms.LeakyBucket, algorithms.Limit{Rate: 1, Period: time.Millisecond, Burst: algorithms.MaxRate}},
		{algorithms.TokenBucket, algorithms.PerSecond(10).WithBurst(20)},
		{algorithms.TokenBucket, algorithms.Limit{Rate: 1, Period: time.Millisecond}},
	}
	for _, tt := range tests {
		if _, err := algorithms.New(must(memstore.New()), tt.alg, tt.limit); err != nil {
			t.Errorf("algorithms.New(%s, %s): %v", tt.alg, tt.limit, err)
		}
	}
}

// A clock at or before the Unix epoch (a zero time.Time in a test, say)
// still starts every key with no state: the first requests pass.
func TestMemoryClockAtEpoch(t *testing.T) {
	for _, at := range []time.Time{time.Unix(0, 0), {}} {
		for _, alg := range algorithms.All() {
			l, err := algorithms.New(must(memstore.New(memstore.WithClock(func() time.Time { return at }))), alg, algorithms.PerMinute(2))
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []algorithms.Result{
				pass(2, 1, time.Minute, time.Minute),
				pass(2, 0, time.Minute, time.Minute),
			} {
				got, err := l.Allow(context.Background(), "k", 1)
				if alg == algorithms.SlidingWindowCounter {
					want.ResetAfter = 2 * time.Minute
				} else if alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket {
					want.ResetAfter = time.Duration(i+1) * 30 * time.Second
				}
				if err != nil || got != want {
					t.Errorf("%s at %v, request %d: (%+v, %v), want %+v", alg, at, i, got, err, want)
				}
			}
		}
	}
}

// Keys that went quiet are dropped by the next sweep of their shard.
func TestMemoryReclaimsQuietKeys(t *testing.T) {
	for _, alg := range algorithms.All() {
		var mu sync.Mutex
		now := start
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		store := must(memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(time.Second)))
		l, err := algorithms.New(store, alg, algorithms.PerSecond(2), algorithms.PerMinute(10))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 1000 {
			if _, err := l.Allow(context.Background(), fmt.Sprint("old", i), 1); err != nil {
				t.Fatal(err)
			}
		}
		if n := store.Len(); n != 2000 {
			t.Fatalf("%s: %d entries after 1000 keys × 2 limits", alg, n)
		}
		mu.Lock()
		now = now.Add(2 * time.Minute) // past every limit's need, and past the sweep interval
		mu.Unlock()
		for i := range 1000 {
			if _, err := l.Allow(context.Background(), fmt.Sprint("new", i), 1); err != nil {
				t.Fatal(err)
			}
		}
		if n := store.Len(); n != 2000 {
			t.Fatalf("%s: %d entries after the old keys went quiet, want only the 2000 new ones", alg, n)
		}
	}
}

// Many goroutines on one key of the memory store: exactly the limit passes.
func TestMemoryExactUnderConcurrency(t *testing.T) {
	for _, alg := range algorithms.All() {
		l, err := algorithms.New(must(memstore.New()), alg, algorithms.PerHour(100))
		if err != nil {
			t.Fatal(err)
		}
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				for range 20 {
					r, err := l.Allow(context.Background(), "shared", 1)
					if err != nil {
						t.Error(err)
						return
					}
					if r.Allowed {
						allowed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if allowed.Load() != 100 {
			t.Fatalf("%s: %d of 1000 allowed, want 100", alg, allowed.Load())
		}
	}
}

func TestLimitHelpers(t *testing.T) {
	tests := []struct {
		got, want algorithms.Limit
		str       string
	}{
		{algorithms.PerSecond(10), algorithms.Limit{Rate: 10, Period: time.Second}, "10/1s"},
		{algorithms.PerMinute(60), algorithms.Limit{Rate: 60, Period: time.Minute}, "60/1m0s"},
		{algorithms.PerHour(1000).WithBurst(50), algorithms.Limit{Rate: 1000, Period: time.Hour, Burst: 50}, "1000/1h0m0s burst 50"},
	}
	for _, tt := range tests {
		if tt.got != tt.want || tt.got.String() != tt.str {
			t.Errorf("got %+v %q, want %+v %q", tt.got, tt.got.String(), tt.want, tt.str)
		}
	}
}

func TestPolicies(t *testing.T) {
	limits := []algorithms.Limit{algorithms.PerSecond(10), {Rate: 1000, Period: time.Hour, Burst: 50}}
	for _, store := range []algorithms.Store{must(memstore.New()), storeNeverUsed(t)} {
		for _, tt := range []struct {
			alg  algorithms.Algorithm
			want []algorithms.Policy
		}{
			{algorithms.FixedWindow, []algorithms.Policy{{Quota: 10, Window: time.Second}, {Quota: 1000, Window: time.Hour}}},
			{algorithms.TokenBucket, []algorithms.Policy{{Quota: 10, Window: time.Second}, {Quota: 50, Window: 180 * time.Second}}},
		} {
			l, err := algorithms.New(store, tt.alg, limits...)
			if err != nil {
				t.Fatal(err)
			}
			if got := l.Policies(); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("%s: policies %v, want %v", tt.alg, got, tt.want)
			}
		}
	}
}

// redisClientNeverUsed is a client for building limiters that make no call.
func redisClientNeverUsed() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
}

// storeNeverUsed is a store on redisClientNeverUsed, closed with its
// client when t ends. It does not read the eviction policy: New would wait
// up to the timeout for a read that cannot succeed. Nothing it owes can
// reach Redis: it is closed with closeSoon.
func storeNeverUsed(t testing.TB, opts ...Option) *Store {
	c := redisClientNeverUsed()
	s := must(New(c, append(opts, WithEvictionAllowed())...))
	t.Cleanup(func() {
		_ = s.Close(closeSoon())
		_ = c.Close()
	})
	return s
}

// nilObserver is an Observer whose nil pointer would panic when used.
type nilObserver struct{ errors int }

func (o *nilObserver) StoreError(ErrorKind)        { o.errors++ }
func (o *nilObserver) BreakerChanged(string, bool) { o.errors++ }
