package grpclimit_test

import (
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/grpclimit/internal/testredis"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/redisstore"
)

// redisFleet starts n gRPC servers, each with its own go-redis client and
// Redis store (with storeOpts) on the one redis-server at addr, limiting
// with alg and limits and opts; it returns a client of each.
func redisFleet(t *testing.T, addr string, n int, alg algorithms.Algorithm, limit algorithms.Limit, storeOpts []redisstore.Option, opts ...grpclimit.Option) []testgrpc.TestServiceClient {
	t.Helper()
	clients := make([]testgrpc.TestServiceClient, n)
	for i := range n {
		rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rc.Close() })
		store := must(redisstore.New(rc, append([]redisstore.Option{redisstore.WithInstances(n)}, storeOpts...)...))
		t.Cleanup(func() { _ = store.Close(closeCtx()) })
		l, err := algorithms.New(store, alg, limit)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = dial(t, serveLimited(t, l, opts...))
	}
	return clients
}

// TestRedisThreeServersShareALimit: three servers on their own Redis
// stores share each limit exactly: of many concurrent calls from one
// client spread over them, the quota passes and nothing more, on every
// algorithm; refusals carry their details and trailers.
func TestRedisThreeServersShareALimit(t *testing.T) {
	addr := testredis.Start(t)
	const quota, calls = 10, 30
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			n := callFleet(t, addr, alg, quota, calls, nil)
			if n[codes.OK] != quota || n[codes.ResourceExhausted] != calls-quota {
				t.Fatalf("codes %v, want exactly %d OK and %d ResourceExhausted", n, quota, calls-quota)
			}
		})
	}
}

// TestRedisLeasedServersShareALimit: three servers on leased Redis stores
// (redisstore.WithLeases) share each limit as docs/redis.md promises: of
// many concurrent calls from one client spread over them, at most the
// quota passes, and at most N × q fewer (N = 3 instances, q = max(1,
// quota/8) = 2 units a lease), while the leases other servers hold are
// not yet given back; every refusal carries its details and trailers.
func TestRedisLeasedServersShareALimit(t *testing.T) {
	addr := testredis.Start(t)
	const quota, calls, instances, q = 16, 48, 3, 2
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindowCounter, algorithms.TokenBucket, algorithms.LeakyBucket} {
		t.Run(string(alg), func(t *testing.T) {
			n := callFleet(t, addr, alg, quota, calls,
				[]redisstore.Option{redisstore.WithLeases(time.Second), redisstore.WithPrefix("leased-" + string(alg))})
			t.Logf("codes %v", n)
			if n[codes.OK] > quota || n[codes.OK] < quota-instances*q || n[codes.OK]+n[codes.ResourceExhausted] != calls {
				t.Fatalf("codes %v, want from %d to %d OK and the rest ResourceExhausted", n, quota-instances*q, quota)
			}
		})
	}
}

// callFleet makes calls concurrent calls, spread over three servers on
// Redis stores with storeOpts, limiting with alg to quota a minute under
// the policy alg; it checks each refusal's details and trailers and
// returns how many calls ended with each code.
func callFleet(t *testing.T, addr string, alg algorithms.Algorithm, quota, calls int, storeOpts []redisstore.Option) map[codes.Code]int {
	t.Helper()
	clients := redisFleet(t, addr, 3, alg, algorithms.PerMinute(quota), storeOpts, grpclimit.WithPolicyName(string(alg)))
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got []codes.Code
	)
	for i := range calls {
		wg.Go(func() {
			code, _, trailer, err := call(t, clients[i%len(clients)])
			if code == codes.ResourceExhausted {
				checkRefusal(t, err, trailer, string(alg), int64(quota))
			}
			mu.Lock()
			got = append(got, code)
			mu.Unlock()
		})
	}
	wg.Wait()
	return count(got)
}

// TestRedisAPIKeysAndStreams: on Redis too, known API keys from metadata
// get a quota each across the servers, and a stream's messages are
// limited.
func TestRedisAPIKeysAndStreams(t *testing.T) {
	addr := testredis.Start(t)
	known := keyfunc.KnownAPIKey(func(raw string) bool { return raw == "k1" || raw == "k2" })
	clients := redisFleet(t, addr, 3, algorithms.SlidingWindowCounter, algorithms.PerMinute(3), nil,
		grpclimit.WithKeyFunc(keyfunc.APIKey("x-api-key", known)))
	for _, key := range []string{"k1", "k2"} {
		var got []codes.Code
		for i := range 5 {
			code, _, _, _ := call(t, clients[i%3], "x-api-key", key)
			got = append(got, code)
		}
		if n := count(got); n[codes.OK] != 3 || n[codes.ResourceExhausted] != 2 {
			t.Fatalf("key %s: codes %v, want 3 OK", key, got)
		}
	}
	if code, _, _, _ := call(t, clients[0], "x-api-key", "k3"); code != codes.Unauthenticated {
		t.Fatalf("unknown key: %v, want Unauthenticated", code)
	}

	rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rc.Close()
	store := must(redisstore.New(rc, redisstore.WithPrefix("msgs")))
	defer store.Close(closeCtx())
	opens, _ := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(5))
	messages, _ := algorithms.New(store, algorithms.TokenBucket, algorithms.PerMinute(3))
	c := dial(t, serveLimited(t, opens, grpclimit.WithMessageLimiter(messages)))
	_, trailer, err := sendStream(t, c, 5)
	checkRefusal(t, err, trailer, "default-messages", 3)
}

// TestRedisClientFleet: three clients, each pacing with its own Redis
// store, share one upstream's rate: nine calls made at once take eight
// intervals, and the upstream, limiting at that rate, refuses none.
func TestRedisClientFleet(t *testing.T) {
	addr := testredis.Start(t)
	const interval = 40 * time.Millisecond
	limit := algorithms.Limit{Rate: 1, Period: interval}
	upstream := serveLimited(t, newLimiter(t, algorithms.LeakyBucket, limit.WithBurst(3)), grpclimit.WithMethodScope(false))
	var clients []testgrpc.TestServiceClient
	for range 3 {
		rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rc.Close() })
		store := must(redisstore.New(rc, redisstore.WithInstances(3)))
		t.Cleanup(func() { _ = store.Close(closeCtx()) })
		l, err := algorithms.New(store, algorithms.LeakyBucket, limit)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, pacedClient(t, upstream, l))
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 9 {
		wg.Go(func() {
			if code, _, _, err := call(t, clients[i%3]); code != codes.OK {
				t.Errorf("a paced call: %v", err)
			}
		})
	}
	wg.Wait()
	if took := time.Since(start); took < 8*interval*9/10 {
		t.Fatalf("9 calls from 3 clients took %v, want about %v", took, 8*interval)
	}
}
