package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memstore"
)

// Peek tells what the next request would get, consuming nothing; Reset
// forgets a key under every limit. On memory (exact, on a manual clock),
// Redis and Cluster.
func TestPeekAndReset(t *testing.T) {
	clock := storetest.NewManualClock(start)
	addr := redistest.Standalone(t)
	single := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer single.Close()
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.Cluster(t), MaxRetries: -1})
	defer cluster.Close()
	stores := []struct {
		name  string
		store func(prefix string) algorithms.Store
		slack time.Duration // how far Redis's clock moves between two calls
	}{
		{"memory", func(string) algorithms.Store { return must(memstore.New(memstore.WithClock(clock.Now))) }, 0},
		{"redis", func(p string) algorithms.Store { return must(New(single, WithPrefix(p), WithTimeout(time.Minute))) }, 50 * time.Millisecond},
		{"cluster", func(p string) algorithms.Store { return must(New(cluster, WithPrefix(p), WithTimeout(time.Minute))) }, 50 * time.Millisecond},
	}
	ctx := context.Background()
	for _, st := range stores {
		for _, alg := range algorithms.All() {
			t.Run(st.name+"/"+string(alg), func(t *testing.T) {
				limits := []algorithms.Limit{algorithms.PerMinute(3), {Rate: 5, Period: time.Hour, Burst: 5}}
				l, err := algorithms.New(st.store(fmt.Sprint(st.name, alg)), alg, limits...)
				if err != nil {
					t.Fatal(err)
				}
				same := func(step string, peek, got algorithms.Result) {
					t.Helper()
					d := peek.RetryAfter - got.RetryAfter
					if peek.Allowed != got.Allowed || peek.Remaining != got.Remaining || peek.Limit != got.Limit ||
						peek.Index != got.Index || d > st.slack || -d > st.slack {
						t.Fatalf("%s: Peek %+v, then Allow %+v", step, peek, got)
					}
				}
				for i := range 5 { // three pass, then denials
					p1, err := l.Peek(ctx, "k")
					if err != nil {
						t.Fatal(err)
					}
					p2, _ := l.Peek(ctx, "k") // a peek consumes nothing
					same(fmt.Sprintf("peek twice before request %d", i), p1, p2)
					got, err := l.Allow(ctx, "k", 1)
					if err != nil {
						t.Fatal(err)
					}
					same(fmt.Sprintf("request %d", i), p1, got)
					if got.Allowed != (i < 3) {
						t.Fatalf("request %d: %+v", i, got)
					}
				}
				if err := l.Reset(ctx, "k"); err != nil {
					t.Fatal(err)
				}
				p, err := l.Peek(ctx, "k")
				if err != nil || !p.Allowed || p.Remaining != 2 {
					t.Fatalf("after Reset: %+v %v, want a fresh key", p, err)
				}
				for i := range 3 {
					if got, _ := l.Allow(ctx, "k", 1); !got.Allowed {
						t.Fatalf("after Reset, request %d denied: %+v", i, got)
					}
				}
				if _, err := l.Peek(ctx, ""); err == nil {
					t.Error("Peek of an empty key accepted")
				}
			})
		}
	}
}
