package middleware

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// Two instances, each its own client of one Redis, 2 requests a minute,
// charging only server errors: B answers 429 while A's two slow requests
// hold the quota, and caches that denial; A's requests succeed and are
// given back, and within denialCacheBound B serves the client again
// instead of answering 429 for the rest of the minute.
// denialCacheBound is the Redis store's promise (docs/redis.md): no
// instance refuses a request Redis would admit for longer than 100 ms
// after a refund made through any instance.
const denialCacheBound = 100 * time.Millisecond

func TestChargeIfRefundReachesOtherInstances(t *testing.T) {
	addr := redistest.Standalone(t)
	instance := func(h http.Handler) http.Handler {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = c.Close() })
		lim := newLimiter(t, must(redisstore.New(c, redisstore.WithTimeout(time.Second))), algorithms.FixedWindow, algorithms.PerMinute(2))
		return mustNew(t, lim, WithKeyFunc(headerKey), WithTimeout(5*time.Second),
			WithChargeIf(func(status int) bool { return status >= 500 }))(h)
	}
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(2)
	a := instance(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started.Done()
		<-release
		w.WriteHeader(http.StatusOK)
	}))
	b := instance(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))

	var done sync.WaitGroup
	for range 2 {
		done.Go(func() {
			if code := get(a, "/", "customer").Code; code != http.StatusOK {
				t.Errorf("A: %d, want 200", code)
			}
		})
	}
	started.Wait()
	// B's denial comes from Redis, then from its cache; past the bound of
	// the cached denial's own age it is still answered, from the cache.
	for i := range 3 {
		rec := get(b, "/", "customer")
		if rec.Code != http.StatusTooManyRequests {
			t.Fatalf("B while A holds the quota (%d): %d, want 429", i, rec.Code)
		}
		if s, _ := strconv.Atoi(rec.Header().Get("Retry-After")); s < 59 {
			t.Fatalf("B: Retry-After %q, want about 60", rec.Header().Get("Retry-After"))
		}
		time.Sleep(denialCacheBound + 50*time.Millisecond)
	}
	close(release)
	done.Wait()
	refunded := time.Now()
	for {
		code := get(b, "/", "customer").Code
		if code == http.StatusOK {
			t.Logf("B served the client %v after A's refunds", time.Since(refunded))
			return
		}
		if time.Since(refunded) > denialCacheBound {
			t.Fatalf("B still answers %d %v after A's refunds", code, time.Since(refunded))
		}
		time.Sleep(time.Millisecond)
	}
}
