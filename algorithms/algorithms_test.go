package algorithms

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
)

func TestNewRefusesBadInput(t *testing.T) {
	mem := NewMemoryStore()
	tests := []struct {
		name   string
		store  Store
		alg    Algorithm
		limits []Limit
		want   error
	}{
		{"unknown algorithm", mem, "lottery", []Limit{PerSecond(1)}, ErrUnknownAlgorithm},
		{"empty algorithm", mem, "", []Limit{PerSecond(1)}, ErrUnknownAlgorithm},
		{"no limits", mem, FixedWindow, nil, ErrInvalidLimit},
		{"zero rate", mem, FixedWindow, []Limit{{Rate: 0, Period: time.Second}}, ErrInvalidLimit},
		{"negative rate", mem, FixedWindow, []Limit{{Rate: -1, Period: time.Second}}, ErrInvalidLimit},
		{"zero period", mem, FixedWindow, []Limit{{Rate: 1}}, ErrInvalidLimit},
		{"negative period", mem, TokenBucket, []Limit{{Rate: 1, Period: -time.Second}}, ErrInvalidLimit},
		{"period under a millisecond", mem, TokenBucket, []Limit{{Rate: 1, Period: 999 * time.Microsecond}}, ErrInvalidLimit},
		{"period with nanoseconds", mem, TokenBucket, []Limit{{Rate: 1, Period: time.Second + 1}}, ErrInvalidLimit},
		{"negative burst", mem, TokenBucket, []Limit{{Rate: 1, Period: time.Second, Burst: -1}}, ErrInvalidLimit},
		{"rate over MaxRate", mem, LeakyBucket, []Limit{{Rate: MaxRate + 1, Period: 24 * time.Hour}}, ErrInvalidLimit},
		{"fixed window rate 2^53+1", mem, FixedWindow, []Limit{{Rate: 1<<53 + 1, Period: time.Second}}, ErrInvalidLimit},
		{"fixed window rate MaxInt", mem, FixedWindow, []Limit{{Rate: math.MaxInt, Period: time.Second}}, ErrInvalidLimit},
		{"counter rate MaxInt", mem, SlidingWindowCounter, []Limit{{Rate: math.MaxInt, Period: time.Second}}, ErrInvalidLimit},
		{"bucket rate MaxInt burst 2", mem, TokenBucket, []Limit{{Rate: math.MaxInt, Period: time.Second, Burst: 2}}, ErrInvalidLimit},
		{"burst over MaxRate", mem, LeakyBucket, []Limit{{Rate: 1, Period: time.Millisecond, Burst: MaxRate + 1}}, ErrInvalidLimit},
		{"burst MaxInt", mem, TokenBucket, []Limit{{Rate: 1, Period: time.Second, Burst: math.MaxInt}}, ErrInvalidLimit},
		{"refill over MaxRefill", mem, LeakyBucket, []Limit{{Rate: 1, Period: MaxPeriod, Burst: 101}}, ErrInvalidLimit},
		{"period over a year", mem, FixedWindow, []Limit{{Rate: 1, Period: MaxPeriod + time.Second}}, ErrInvalidLimit},
		{"sliding log rate over its cap", mem, SlidingWindowLog, []Limit{{Rate: MaxSlidingLogRate + 1, Period: time.Hour}}, ErrInvalidLimit},
		{"bucket refilling in 164 years", mem, TokenBucket, []Limit{{Rate: 1, Period: 24 * time.Hour, Burst: 60_000}}, ErrInvalidLimit},
		{"the same limit twice", mem, TokenBucket, []Limit{PerSecond(10), PerSecond(10)}, ErrInvalidLimit},
		{"limits a window treats as one", mem, FixedWindow, []Limit{PerSecond(10), PerSecond(10).WithBurst(20)}, ErrInvalidLimit},
		{"one bad limit of two", mem, SlidingWindowLog, []Limit{PerSecond(1), {Rate: 0, Period: time.Second}}, ErrInvalidLimit},
		{"nil store", nil, FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
		{"nil clock", NewMemoryStore(WithClock(nil)), FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
		{"prefix with a brace", NewMemoryStore(WithPrefix("a{b")), FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
		{"empty prefix", NewRedisStore(nil, WithPrefix("")), FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
		{"nil redis client", NewRedisStore(nil), FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
		{"zero sweep interval", NewMemoryStore(WithSweepInterval(0)), FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
		{"max keys zero", NewMemoryStore(WithMaxKeys(0)), FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
		{"max keys negative", NewMemoryStore(WithMaxKeys(-1)), FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
		{"max keys under 1024", NewMemoryStore(WithMaxKeys(1023)), FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
		{"nil memory store option", NewMemoryStore(WithPrefix("a"), nil), FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
		{"nil redis store option", NewRedisStore(redisClientNeverUsed(), nil), FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
		{"typed nil memory store", (*MemoryStore)(nil), FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
		{"typed nil redis store", (*RedisStore)(nil), FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
		{"zero memory store", &MemoryStore{}, FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
		{"zero redis store", &RedisStore{}, FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
		{"typed nil redis client", NewRedisStore((*redis.Client)(nil)), FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
		{"typed nil cluster client", NewRedisStore((*redis.ClusterClient)(nil)), FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
		{"typed nil observer", NewRedisStore(redisClientNeverUsed(), WithObserver((*nilObserver)(nil))), FixedWindow, []Limit{PerSecond(1)}, ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(tt.store, tt.alg, tt.limits...)
			if !errors.Is(err, tt.want) || l != nil {
				t.Fatalf("New: (%v, %v), want error %v", l, err, tt.want)
			}
		})
	}
}

func TestAllowRefusesBadRequests(t *testing.T) {
	for _, alg := range Algorithms {
		l, err := New(NewMemoryStore(), alg, Limit{Rate: 5, Period: time.Second, Burst: 3}, PerMinute(4))
		if err != nil {
			t.Fatal(err)
		}
		bucket := alg == TokenBucket || alg == LeakyBucket
		tests := []struct {
			key  string
			cost int
			want error
		}{
			{"", 1, ErrInvalidKey},
			{strings.Repeat("k", MaxKeyLength+1), 1, ErrInvalidKey},
			{"k", 0, ErrInvalidCost},
			{"k", -3, ErrInvalidCost},
			{"k", 6, ErrCostExceedsLimit},
			{"k", 5, ErrCostExceedsLimit}, // the per-minute limit holds 4
		}
		if bucket {
			tests = append(tests, struct {
				key  string
				cost int
				want error
			}{"k", 4, ErrCostExceedsLimit}) // the bucket holds 3
		}
		for _, tt := range tests {
			r, err := l.Allow(context.Background(), tt.key, tt.cost)
			if !errors.Is(err, tt.want) || r.Allowed {
				t.Errorf("%s: Allow(len %d, cost %d) = (%+v, %v), want error %v", alg, len(tt.key), tt.cost, r, err, tt.want)
			}
		}
		// The longest key is fine, and nothing above consumed anything.
		r, err := l.Allow(context.Background(), strings.Repeat("k", MaxKeyLength), 1)
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
		alg   Algorithm
		limit Limit
	}{
		{FixedWindow, Limit{Rate: MaxRate, Period: MaxPeriod}},
		{SlidingWindowLog, Limit{Rate: MaxSlidingLogRate, Period: time.Hour}},
		{SlidingWindowCounter, Limit{Rate: MaxRate, Period: MaxPeriod}},
		{TokenBucket, Limit{Rate: MaxRate, Period: MaxPeriod, Burst: MaxRate}},
		{LeakyBucket, Limit{Rate: 1, Period: MaxPeriod, Burst: 99}},
		{LeakyBucket, Limit{Rate: 1, Period: time.Millisecond, Burst: MaxRate}},
		{TokenBucket, PerSecond(10).WithBurst(20)},
		{TokenBucket, Limit{Rate: 1, Period: time.Millisecond}},
	}
	for _, tt := range tests {
		if _, err := New(NewMemoryStore(), tt.alg, tt.limit); err != nil {
			t.Errorf("New(%s, %s): %v", tt.alg, tt.limit, err)
		}
	}
}

// A clock at or before the Unix epoch (a zero time.Time in a test, say)
// still starts every key with no state: the first requests pass.
func TestMemoryClockAtEpoch(t *testing.T) {
	for _, at := range []time.Time{time.Unix(0, 0), {}} {
		for _, alg := range Algorithms {
			l, err := New(NewMemoryStore(WithClock(func() time.Time { return at })), alg, PerMinute(2))
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []Result{
				pass(2, 1, time.Minute, time.Minute),
				pass(2, 0, time.Minute, time.Minute),
			} {
				got, err := l.Allow(context.Background(), "k", 1)
				if alg == SlidingWindowCounter {
					want.ResetAfter = 2 * time.Minute
				} else if alg == TokenBucket || alg == LeakyBucket {
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
	for _, alg := range Algorithms {
		var mu sync.Mutex
		now := start
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		store := NewMemoryStore(WithClock(clock), WithSweepInterval(time.Second)).(*MemoryStore)
		l, err := New(store, alg, PerSecond(2), PerMinute(10))
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
	for _, alg := range Algorithms {
		l, err := New(NewMemoryStore(), alg, PerHour(100))
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
		got, want Limit
		str       string
	}{
		{PerSecond(10), Limit{Rate: 10, Period: time.Second}, "10/1s"},
		{PerMinute(60), Limit{Rate: 60, Period: time.Minute}, "60/1m0s"},
		{PerHour(1000).WithBurst(50), Limit{Rate: 1000, Period: time.Hour, Burst: 50}, "1000/1h0m0s burst 50"},
	}
	for _, tt := range tests {
		if tt.got != tt.want || tt.got.String() != tt.str {
			t.Errorf("got %+v %q, want %+v %q", tt.got, tt.got.String(), tt.want, tt.str)
		}
	}
}

func TestPolicies(t *testing.T) {
	limits := []Limit{PerSecond(10), {Rate: 1000, Period: time.Hour, Burst: 50}}
	for _, store := range []Store{NewMemoryStore(), NewRedisStore(redisClientNeverUsed())} {
		for _, tt := range []struct {
			alg  Algorithm
			want []Policy
		}{
			{FixedWindow, []Policy{{10, time.Second}, {1000, time.Hour}}},
			{TokenBucket, []Policy{{10, time.Second}, {50, 180 * time.Second}}},
		} {
			l, err := New(store, tt.alg, limits...)
			if err != nil {
				t.Fatal(err)
			}
			d, ok := l.(RateLimiter)
			if !ok {
				t.Fatalf("%T does not describe its limits", l)
			}
			if got := d.Policies(); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("%s: policies %v, want %v", tt.alg, got, tt.want)
			}
		}
	}
}

// redisClientNeverUsed is a client for building limiters that make no call.
func redisClientNeverUsed() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
}

// nilObserver is an Observer whose nil pointer would panic when used.
type nilObserver struct{ errors int }

func (o *nilObserver) StoreError(ErrorKind)        { o.errors++ }
func (o *nilObserver) BreakerChanged(string, bool) { o.errors++ }
