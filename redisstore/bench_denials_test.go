package redisstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// BenchmarkRedisAllowCached measures a Redis store's decision when the
// denial cache answers: every key is exhausted and its denial cached, and
// the entries are older than denialCacheBound, so the cache trusts them on
// the strength of its subscription rather than their age. (Before the
// subscription existed, the cache trusted any denial until its end.)
func BenchmarkRedisAllowCached(b *testing.B) {
	addr := redistest.Standalone(b)
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	defer c.Close()
	l, err := algorithms.New(must(New(c)), algorithms.FixedWindow, algorithms.PerMinute(1))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range benchKeys {
		for range 2 {
			if _, err := l.Allow(ctx, k, 1); err != nil {
				b.Fatal(err)
			}
		}
	}
	cached := func(r algorithms.Result, err error) bool {
		return err == nil && !r.Allowed && r.Decider == algorithms.DecidedByCache
	}
	// The first denials predate the cache's subscription: past the bound,
	// Redis is asked again, and the new ones are followed.
	time.Sleep(150 * time.Millisecond)
	for _, k := range benchKeys {
		if r, err := l.Allow(ctx, k, 1); err != nil || r.Allowed {
			b.Fatalf("%s: %+v, %v, want a denial", k, r, err)
		}
	}
	time.Sleep(150 * time.Millisecond)
	for _, k := range benchKeys {
		if r, err := l.Allow(ctx, k, 1); !cached(r, err) {
			b.Fatalf("%s: %+v, %v, want a cached denial", k, r, err)
		}
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if r, err := l.Allow(ctx, benchKeys[i&(len(benchKeys)-1)], 1); !cached(r, err) {
				b.Fatalf("Allow: %+v, %v", r, err)
			}
		}
	})
	// Run flat out on every core, the subscription's goroutines may answer
	// late, and a denial the cache no longer trusts is asked of Redis:
	// reported as redis/op.
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		var asked atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				r, err := l.Allow(ctx, benchKeys[i&(len(benchKeys)-1)], 1)
				if err != nil || r.Allowed {
					b.Errorf("Allow: %+v, %v", r, err)
					return
				}
				if r.Decider != algorithms.DecidedByCache {
					asked.Add(1)
				}
			}
		})
		b.ReportMetric(float64(asked.Load())/float64(b.N), "redis/op")
	})
}

// BenchmarkRedisAllowRefund measures a request charged by its outcome on a
// Redis store: an Allow and the Refund that gives its unit back, the
// pattern of middleware.WithChargeIf for a request that is not charged.
func BenchmarkRedisAllowRefund(b *testing.B) {
	addr := redistest.Standalone(b)
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	defer c.Close()
	l, err := algorithms.New(must(New(c)), algorithms.FixedWindow, algorithms.PerMinute(1_000_000))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			k := benchKeys[i&(len(benchKeys)-1)]
			if r, err := l.Allow(ctx, k, 1); err != nil || !r.Allowed {
				b.Errorf("Allow: %+v, %v", r, err)
				return
			}
			if _, err := l.Refund(ctx, k, 1, 0); err != nil {
				b.Errorf("Refund: %v", err)
				return
			}
		}
	})
}

// BenchmarkDenialsForgetDigest measures what an announcement costs a store
// whose cache holds 10,000 denials: the digest does not name the shard.
func BenchmarkDenialsForgetDigest(b *testing.B) {
	d := newDenials(DefaultDenialCacheSize)
	l := &redisLimiter{}
	now := time.Now()
	for i := range 10_000 {
		d.remember(l, ipKey(i), 1, now, algorithms.Result{RetryAfter: time.Hour})
	}
	digest := digestOf("absent")
	b.ReportAllocs()
	for b.Loop() {
		d.forgetDigest(digest)
	}
}
