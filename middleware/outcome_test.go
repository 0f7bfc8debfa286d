package middleware

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/redisstore"
)

// outcomeStore is a store the charge-by-outcome tests run on, as a
// limiter factory: each limiter has a prefix of its own.
type outcomeStore struct {
	name string
	new  func(alg algorithms.Algorithm, limits ...algorithms.Limit) algorithms.Limiter
}

// outcomeStores are the stores the charge-by-outcome tests run on: memory,
// Redis and Cluster.
func outcomeStores(t *testing.T) []outcomeStore {
	t.Helper()
	single := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
	t.Cleanup(func() { _ = single.Close() })
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.Cluster(t)})
	t.Cleanup(func() { _ = cluster.Close() })
	var n atomic.Int64
	onRedis := func(c redis.UniversalClient) func(algorithms.Algorithm, ...algorithms.Limit) algorithms.Limiter {
		return func(alg algorithms.Algorithm, limits ...algorithms.Limit) algorithms.Limiter {
			prefix := "outcome" + strconv.FormatInt(n.Add(1), 10)
			return newLimiter(t, must(redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithTimeout(5*time.Second))), alg, limits...)
		}
	}
	return []outcomeStore{
		{"memory", func(alg algorithms.Algorithm, limits ...algorithms.Limit) algorithms.Limiter {
			return newLimiter(t, must(memstore.New()), alg, limits...)
		}},
		{"redis", onRedis(single)},
		{"cluster", onRedis(cluster)},
	}
}

// The charge-by-outcome tests on outcomeStores, each a subtest of this
// one, so that its Redis server and Cluster start once, not once a test.
func TestOnOutcomeStores(t *testing.T) {
	stores := outcomeStores(t)
	for _, tc := range []struct {
		name string
		run  func(*testing.T, []outcomeStore)
	}{
		{"CostAfterAboveQuota", testCostAfterAboveQuota},
		{"CostAfterAboveQuotaOnePerPeriodRedis", testCostAfterAboveQuotaOnePerPeriodRedis},
		{"ChargeIfBurst", testChargeIfBurst},
		{"SetCostSettles", testSetCostSettles},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, stores) })
	}
}

// slowHandler sleeps, answers status, and records the most requests it
// ever ran at once.
type slowHandler struct {
	status          int
	sleep           time.Duration
	running, most   atomic.Int64
	served          atomic.Int64
	setCost, costTo int // SetCost(r, costTo) when setCost is 1
}

func (h *slowHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := h.running.Add(1)
	for m := h.most.Load(); n > m && !h.most.CompareAndSwap(m, n); m = h.most.Load() {
	}
	h.served.Add(1)
	time.Sleep(h.sleep)
	if h.setCost == 1 && !SetCost(r, h.costTo) {
		panic("SetCost found no settling middleware")
	}
	h.running.Add(-1)
	w.WriteHeader(h.status)
}

func failuresOnly(status int) bool { return status >= 400 }

// A burst of 50 slow requests against a quota of 10, counting only
// failures: when they all succeed, never more than 10 run at once (each is
// reserved before it runs), and once they end the whole quota is back; when
// they all fail, exactly 10 pass. Every algorithm, on every store.
func testChargeIfBurst(t *testing.T, stores []outcomeStore) {
	for _, st := range stores {
		for _, alg := range algorithms.All() {
			t.Run(st.name+"/"+string(alg), func(t *testing.T) {
				t.Parallel()
				lim := st.new(alg, algorithms.PerHour(10))
				for _, tc := range []struct {
					status   int
					wantPass int // -1: at least 10, at most 10 at once
				}{
					{http.StatusOK, -1},
					{http.StatusUnauthorized, 10},
				} {
					h := &slowHandler{status: tc.status, sleep: 20 * time.Millisecond}
					mw := mustNew(t, lim, WithKeyFunc(headerKey), WithTimeout(5*time.Second), WithChargeIf(failuresOnly))(h)
					client := "c" + strconv.Itoa(tc.status)
					codes := burst(mw, client, 50)
					switch {
					case h.most.Load() > 10:
						t.Errorf("status %d: %d requests ran at once, over the quota of 10", tc.status, h.most.Load())
					case h.most.Load() < 2:
						t.Errorf("status %d: the requests never overlapped; the test proves nothing", tc.status)
					case tc.wantPass < 0 && (codes[tc.status] < 10 || int(h.served.Load()) != codes[tc.status]):
						t.Errorf("status %d: %v, handler ran %d times; want at least 10 served", tc.status, codes, h.served.Load())
					case tc.wantPass >= 0 && (codes[tc.status] != tc.wantPass || codes[http.StatusTooManyRequests] != 50-tc.wantPass):
						t.Errorf("status %d: %v; want exactly %d passes", tc.status, codes, tc.wantPass)
					}
					// After successes the whole quota is back: ten failures
					// pass, the eleventh does not; after failures nothing is.
					fail := mustNew(t, lim, WithKeyFunc(headerKey), WithTimeout(5*time.Second), WithChargeIf(failuresOnly))(
						&slowHandler{status: http.StatusForbidden})
					want := 10
					if tc.wantPass >= 0 {
						want = 0
					}
					for i := range 11 {
						code := get(fail, "/", client).Code
						if (code == http.StatusForbidden) != (i < want) {
							t.Fatalf("status %d: request %d afterwards got %d; want %d to pass", tc.status, i+1, code, want)
						}
					}
				}
			})
		}
	}
}

// burst sends n concurrent requests from client through h and counts the
// statuses.
func burst(h http.Handler, client string, n int) map[int]int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range n {
		wg.Go(func() {
			code := get(h, "/", client).Code
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return codes
}

// SetCost settles the reserved cost down (a refund, never above the quota)
// and up (a further charge), on every store.
func testSetCostSettles(t *testing.T, stores []outcomeStore) {
	for _, st := range stores {
		for _, tc := range []struct {
			name     string
			reserved int
			final    int
			thenPass int // requests of cost 1 that pass afterwards, of a quota of 10
		}{
			{"down to nothing", 4, 0, 10},
			{"down", 4, 1, 9},
			{"unchanged", 4, 4, 6},
			{"up", 1, 5, 5},
			{"up past the quota", 8, 12, 0},
		} {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				lim := st.new(algorithms.FixedWindow, algorithms.PerHour(10))
				h := &slowHandler{status: http.StatusOK, setCost: 1, costTo: tc.final}
				reserved := func(*http.Request) int { return tc.reserved }
				mw := mustNew(t, lim, WithKeyFunc(headerKey), WithCost(reserved), WithCostAfter())(h)
				if code := get(mw, "/", "k").Code; code != http.StatusOK {
					t.Fatalf("the request got %d", code)
				}
				plain := mustNew(t, lim, WithKeyFunc(headerKey))(&okHandler{})
				passed := 0
				for range 11 {
					if get(plain, "/", "k").Code == http.StatusOK {
						passed++
					}
				}
				if passed != tc.thenPass {
					t.Errorf("%d passed afterwards, want %d", passed, tc.thenPass)
				}
			})
		}
	}
}

// Under WithChargeIf a response the predicate refuses costs nothing,
// whatever SetCost says; SetCost outside settling middleware, or with a
// negative cost, does nothing and says so.
func TestSetCostRules(t *testing.T) {
	lim := newLimiter(t, must(memstore.New()), algorithms.TokenBucket, algorithms.PerHour(3))
	h := &slowHandler{status: http.StatusOK, setCost: 1, costTo: 3}
	mw := mustNew(t, lim, WithKeyFunc(headerKey), WithCostAfter(), WithChargeIf(failuresOnly))(h)
	for range 5 {
		if code := get(mw, "/", "k").Code; code != http.StatusOK {
			t.Fatalf("a successful request, uncharged, got %d", code)
		}
	}
	if SetCost(httptest.NewRequest(http.MethodGet, "/", nil), 1) {
		t.Error("SetCost outside settling middleware reported success")
	}
	var negative atomic.Bool
	neg := mustNew(t, lim, WithKeyFunc(headerKey), WithCostAfter())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		negative.Store(SetCost(r, -1))
	}))
	get(neg, "/", "n")
	if negative.Load() {
		t.Error("SetCost with a negative cost reported success")
	}
	// WithChargeIf alone does not enable SetCost.
	var alone atomic.Bool
	only := mustNew(t, lim, WithKeyFunc(headerKey), WithChargeIf(failuresOnly))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		alone.Store(SetCost(r, 0))
	}))
	get(only, "/", "o")
	if alone.Load() {
		t.Error("SetCost without WithCostAfter reported success")
	}
}

// A handler that panics keeps its charge; one that streams still can
// flush through the status recorder, and its status is the one it sent.
func TestChargeIfWriterBehaviour(t *testing.T) {
	lim := newLimiter(t, must(memstore.New()), algorithms.FixedWindow, algorithms.PerHour(2))
	successes := func(status int) bool { return status < 400 }
	panicky := mustNew(t, lim, WithKeyFunc(headerKey), WithChargeIf(failuresOnly))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic(http.ErrAbortHandler)
	}))
	for range 2 {
		func() {
			defer func() { _ = recover() }()
			get(panicky, "/", "p")
		}()
	}
	if code := get(panicky, "/", "p").Code; code != http.StatusTooManyRequests {
		t.Errorf("after two panics the third request got %d, want 429: a panic keeps its charge", code)
	}
	flushed := false
	stream := mustNew(t, lim, WithKeyFunc(headerKey), WithChargeIf(successes))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		f, ok := w.(http.Flusher)
		if ok {
			f.Flush()
		}
		flushed = ok && http.NewResponseController(w).Flush() == nil
	}))
	for range 3 {
		if rec := get(stream, "/", "s"); rec.Code != http.StatusNotFound || !rec.Flushed {
			t.Fatalf("streaming 404: %d, flushed %v", rec.Code, rec.Flushed)
		}
	}
	if !flushed {
		t.Error("the handler could not flush through the middleware")
	}
}

// Settlement options that no request could be settled with are refused at
// construction.
func TestChargeIfMisconfigured(t *testing.T) {
	mem := newLimiter(t, must(memstore.New()), algorithms.FixedWindow, algorithms.PerHour(2))
	for _, tc := range []struct {
		name string
		lim  algorithms.Limiter
		opts []Option
		want string // in the error
	}{
		{"nil predicate", mem, []Option{WithChargeIf(nil)}, "WithChargeIf"},
		{"limiter without refunds", stubLimiter{}, []Option{WithChargeIf(failuresOnly)}, "with Refund"},
		{"SetCost without refunds", stubLimiter{}, []Option{WithCostAfter()}, "with Refund"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mw, err := New(tc.lim, tc.opts...)
			checkRefused(t, mw, err, tc.want)
		})
	}
}

// A reservation a stand-in decided while Redis could not answer is not
// given back (Redis never took it; the refund would be lost anyway): the
// stand-in keeps the charge, the strict side.
func TestChargeIfLocalDecisionKeepsCharge(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer client.Close()
	lim := newLimiter(t, must(redisstore.New(client, redisstore.WithTimeout(200*time.Millisecond))),
		algorithms.FixedWindow, algorithms.PerHour(3))
	mw := mustNew(t, lim, WithKeyFunc(headerKey), WithTimeout(time.Second), WithBreakFor(0), WithChargeIf(failuresOnly))(&okHandler{})
	codes := map[int]int{}
	for range 5 {
		codes[get(mw, "/", "k").Code]++
	}
	if codes[http.StatusOK] != 3 || codes[http.StatusTooManyRequests] != 2 {
		t.Errorf("statuses %v; want the local stand-in's 3 passes, charged", codes)
	}
}

// In shadow mode the middleware counts as it would when enforcing: only
// the charged responses use up the quota, so the shadow counts tell how
// the limit would behave.
func TestChargeIfShadow(t *testing.T) {
	lim := newLimiter(t, must(memstore.New()), algorithms.FixedWindow, algorithms.PerHour(3))
	ok := mustNew(t, lim, WithKeyFunc(headerKey), WithShadow(true), WithChargeIf(failuresOnly))(&slowHandler{status: http.StatusOK})
	for range 5 {
		get(ok, "/", "k")
	}
	enforced := mustNew(t, lim, WithKeyFunc(headerKey), WithChargeIf(failuresOnly))(&slowHandler{status: http.StatusForbidden})
	passed := 0
	for range 4 {
		if get(enforced, "/", "k").Code == http.StatusForbidden {
			passed++
		}
	}
	if passed != 3 {
		t.Errorf("after 5 uncharged successes in shadow mode, %d of 4 failures passed; want the whole quota, 3", passed)
	}
}
