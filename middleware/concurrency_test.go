package middleware

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/redisstore"
)

// newConcurrencyLimiter is a memory concurrency limit on a clock that
// stands still, so no lease expires during a test.
func newConcurrencyLimiter(t testing.TB, limit int) algorithms.ConcurrencyLimiter {
	t.Helper()
	clock := storetest.NewManualClock(epoch)
	l, err := algorithms.NewConcurrency(must(memstore.New(memstore.WithClock(clock.Now))), limit, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// gate is a handler that holds each request until it is opened.
type gate struct {
	entered chan struct{}
	open    chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 100), open: make(chan struct{})} }

func (g *gate) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	g.entered <- struct{}{}
	<-g.open
	_, _ = w.Write([]byte("ok"))
}

// Over the limit: 429 with a problem body, Retry-After and the IETF fields
// with qu="concurrent-requests"; under it, the fields with what remains.
// Other clients have slots of their own, and slots come back.
func TestConcurrencyHeadersAndDenial(t *testing.T) {
	g := newGate()
	h := mustNewConcurrency(t, newConcurrencyLimiter(t, 2), WithKeyFunc(headerKey))(g)

	recs := make([]*httptest.ResponseRecorder, 2)
	var wg sync.WaitGroup
	for i := range recs {
		wg.Go(func() { recs[i] = get(h, "/", "alice") })
		<-g.entered
	}
	rec := get(h, "/", "alice")
	body := checkProblem(t, rec, http.StatusTooManyRequests)
	if body.Type != quotaExceededType || len(body.ViolatedPolicies) != 1 || body.ViolatedPolicies[0] != "concurrency" {
		t.Errorf("body %+v", body)
	}
	want := map[string]string{
		"Retry-After":      "1",
		"Ratelimit-Policy": `"concurrency";q=2;qu="concurrent-requests"`,
		"Ratelimit":        `"concurrency";r=0;t=1`,
	}
	for name, v := range want {
		if got := rec.Header().Values(name); len(got) != 1 || got[0] != v {
			t.Errorf("%s: %q, want %q", name, got, v)
		}
	}
	for _, name := range []string{hdrLimit, hdrRemaining, hdrReset} {
		if v := rec.Header().Get(name); v != "" {
			t.Errorf("%s sent: %q", name, v)
		}
	}

	bob := make(chan *httptest.ResponseRecorder)
	go func() { bob <- get(h, "/", "bob") }()
	<-g.entered
	close(g.open)
	wg.Wait()
	if rec := <-bob; rec.Code != http.StatusOK || rec.Header().Get("Ratelimit") != `"concurrency";r=1` {
		t.Errorf("another client: %d %q", rec.Code, rec.Header().Get("Ratelimit"))
	}
	got := map[string]bool{}
	for _, rec := range recs {
		if rec.Code != http.StatusOK || rec.Header().Get("Retry-After") != "" {
			t.Errorf("held request: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
		}
		got[rec.Header().Get("Ratelimit")] = true
	}
	if !got[`"concurrency";r=1`] || !got[`"concurrency";r=0`] {
		t.Errorf("the two held requests' RateLimit: %v, want r=1 and r=0", got)
	}
	for range 3 { // both slots came back
		if rec := get(h, "/", "alice"); rec.Code != http.StatusOK {
			t.Fatalf("after the requests ended: %d", rec.Code)
		}
	}
}

// A handler that panics releases its slot, and the panic goes on.
func TestConcurrencyReleaseOnPanic(t *testing.T) {
	boom := errors.New("boom")
	h := mustNewConcurrency(t, newConcurrencyLimiter(t, 1), WithKeyFunc(headerKey))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(boom) }))
	for i := range 3 {
		func() {
			defer func() {
				if p := recover(); p != boom {
					t.Fatalf("request %d: recovered %v, want the handler's panic", i, p)
				}
			}()
			get(h, "/", "alice")
			t.Fatalf("request %d: no panic", i)
		}()
	}
	// Had a panic kept its slot, every request after the first would be
	// denied before the handler, and not panic.
}

// A client that goes away frees its slot: the handler sees its context end
// and returns, and the release does not depend on that context.
func TestConcurrencyReleaseOnClientGone(t *testing.T) {
	entered := make(chan struct{}, 1)
	var served atomic.Int64
	h := mustNewConcurrency(t, newConcurrencyLimiter(t, 1), WithKeyFunc(headerKey))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/wait" {
				entered <- struct{}{}
				<-r.Context().Done()
				return
			}
			served.Add(1)
		}))
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/wait", nil)
		req.Header.Set("X-Client", "alice")
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-entered
	if code := status(t, srv, "alice"); code != http.StatusTooManyRequests {
		t.Fatalf("while the slot is held: %d, want 429", code)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client's request: %v", err)
	}
	// The lease lasts a minute: only a release frees the slot this soon.
	deadline := time.Now().Add(2 * time.Second)
	for status(t, srv, "alice") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("the slot was not released after the client went away")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if served.Load() != 1 {
		t.Fatalf("served %d, want 1", served.Load())
	}
}

func status(t *testing.T, srv *httptest.Server, client string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	req.Header.Set("X-Client", client)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

type nilConcurrency struct{}

func (*nilConcurrency) Acquire(context.Context, string) (*algorithms.Lease, error) { return nil, nil }

// Key errors get the key error answer, an empty or oversized key 400, a
// limiter's error the failure policy; none of them reaches the handler
// under RefuseOnError.
func TestConcurrencyRefusals(t *testing.T) {
	lim := newConcurrencyLimiter(t, 1)
	next := &okHandler{}
	h := mustNewConcurrency(t, lim, WithKeyFunc(headerKey))(next)
	checkProblem(t, get(h, "/", ""), http.StatusBadRequest) // headerKey fails: 400
	long := mustNewConcurrency(t, lim, WithKeyFunc(func(*http.Request) (string, error) {
		return strings.Repeat("k", algorithms.MaxKeyLength+1), nil
	}))(next)
	checkProblem(t, get(long, "/", "c"), http.StatusBadRequest)
	failing := failingConcurrency{}
	checkProblem(t, get(mustNewConcurrency(t, failing, WithKeyFunc(headerKey))(next), "/", "c"), http.StatusServiceUnavailable)
	if next.count() != 0 {
		t.Fatalf("handler ran %d times", next.count())
	}
	if rec := get(mustNewConcurrency(t, failing, WithKeyFunc(headerKey), WithErrorPolicy(PassOnError))(next), "/", "c"); rec.Code != http.StatusOK || rec.Header().Get("Ratelimit") != "" {
		t.Fatalf("PassOnError: %d, RateLimit %q", rec.Code, rec.Header().Get("Ratelimit"))
	}
}

type failingConcurrency struct{}

func (failingConcurrency) Acquire(context.Context, string) (*algorithms.Lease, error) {
	return nil, errors.New("store down")
}

// Behind a rate limit, both limits' IETF fields are sent, the rate limit's
// first; a request the rate limit denies takes no slot.
func TestConcurrencyBehindRateLimit(t *testing.T) {
	clock := newFakeClock()
	rate := mustNew(t, newCounter(clock, 2, time.Minute), WithKeyFunc(headerKey), WithPolicyName("rate"), withClock(clock.Now))
	conc := mustNewConcurrency(t, newConcurrencyLimiter(t, 1), WithKeyFunc(headerKey))
	next := &okHandler{}
	h := rate(conc(next))
	rec := get(h, "/", "alice")
	policies := rec.Header().Values("Ratelimit-Policy")
	if rec.Code != http.StatusOK || len(policies) != 2 || !strings.HasPrefix(policies[0], `"rate";`) ||
		policies[1] != `"concurrency";q=1;qu="concurrent-requests"` {
		t.Fatalf("%d, RateLimit-Policy %q", rec.Code, policies)
	}
	if got := rec.Header().Values("Ratelimit"); len(got) != 2 || got[1] != `"concurrency";r=0` {
		t.Fatalf("RateLimit %q", got)
	}
	get(h, "/", "alice")
	if rec := get(h, "/", "alice"); rec.Code != http.StatusTooManyRequests || len(rec.Header().Values("Ratelimit-Policy")) != 1 {
		t.Fatalf("third: %d, %q; want the rate limit's 429 alone", rec.Code, rec.Header().Values("Ratelimit-Policy"))
	}
	if next.count() != 2 {
		t.Fatalf("served %d, want 2", next.count())
	}
}

// In shadow mode a request over the limit passes, without headers, and is
// observed as shadow_denied.
func TestConcurrencyShadow(t *testing.T) {
	g := newGate()
	obs := &recordingObserver{}
	h := mustNewConcurrency(t, newConcurrencyLimiter(t, 1), WithKeyFunc(headerKey), WithShadow(true), WithObserver(obs))(g)
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Go(func() {
			rec := get(h, "/", "alice")
			codes[i] = rec.Code
			if v := rec.Header().Get("Ratelimit"); v != "" {
				t.Errorf("shadow mode sent RateLimit %q", v)
			}
		})
		<-g.entered
	}
	close(g.open)
	wg.Wait()
	if codes[0] != http.StatusOK || codes[1] != http.StatusOK {
		t.Fatalf("codes %v", codes)
	}
	if got := strings.Join(obs.outcomes(), ","); got != "allowed,shadow_denied" {
		t.Fatalf("observed %s", got)
	}
	for _, d := range obs.decisions {
		if d.Store != "memory" || d.Policy != DefaultConcurrencyPolicyName {
			t.Errorf("decision %+v", d)
		}
	}
}

// On Redis, 4 instances (a client and a middleware each) under 200
// concurrent requests for one client: the handlers in flight never exceed
// the limit; and a client that goes away releases its slot in Redis, the
// request's context notwithstanding.
func TestRedisConcurrency(t *testing.T) {
	addr := redistest.Standalone(t)
	const limit = 4
	var inFlight, maxSeen atomic.Int64
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for m := maxSeen.Load(); n > m && !maxSeen.CompareAndSwap(m, n); m = maxSeen.Load() {
		}
		if r.URL.Path == "/wait" {
			<-r.Context().Done()
		} else {
			time.Sleep(3 * time.Millisecond)
		}
		inFlight.Add(-1)
	})
	var hs []http.Handler
	for range 4 {
		client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		t.Cleanup(func() { _ = client.Close() })
		l, err := algorithms.NewConcurrency(must(redisstore.New(client, redisstore.WithTimeout(5*time.Second))), limit, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, mustNewConcurrency(t, l, WithKeyFunc(headerKey), WithTimeout(5*time.Second))(next))
	}
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			rec := get(hs[i%4], "/", "alice")
			mu.Lock()
			codes[rec.Code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if maxSeen.Load() > limit || codes[http.StatusOK] == 0 || codes[http.StatusOK]+codes[http.StatusTooManyRequests] != 200 {
		t.Fatalf("statuses %v, at most %d in flight; want at most %d, some admitted, nothing else", codes, maxSeen.Load(), limit)
	}
	t.Logf("statuses %v, at most %d in flight", codes, maxSeen.Load())

	srv := httptest.NewServer(hs[0])
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var held sync.WaitGroup
	for range limit {
		held.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/wait", nil)
			req.Header.Set("X-Client", "bob")
			if resp, err := srv.Client().Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	deadline := time.Now().Add(2 * time.Second)
	for inFlight.Load() < limit {
		if time.Now().After(deadline) {
			t.Fatal("the held requests did not start")
		}
		time.Sleep(time.Millisecond)
	}
	if code := status(t, srv, "bob"); code != http.StatusTooManyRequests {
		t.Fatalf("with every slot held: %d", code)
	}
	cancel()
	held.Wait()
	deadline = time.Now().Add(2 * time.Second)
	for status(t, srv, "bob") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("slots not released in Redis after the clients went away")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WithSkip exempts requests from the concurrency limit as from a rate
// limit: no lease, no headers, however many run at once.
func TestConcurrencySkip(t *testing.T) {
	g := newGate()
	health := func(r *http.Request) bool { return r.URL.Path == "/healthz" }
	h := mustNewConcurrency(t, newConcurrencyLimiter(t, 1), WithKeyFunc(headerKey), WithSkip(health))(g)
	var wg sync.WaitGroup
	recs := make([]*httptest.ResponseRecorder, 4)
	for i := range 3 {
		wg.Go(func() { recs[i] = get(h, "/healthz", "alice") })
		<-g.entered
	}
	// Three exempt requests run; the limit of 1 is still whole.
	wg.Go(func() { recs[3] = get(h, "/", "alice") })
	<-g.entered
	close(g.open)
	wg.Wait()
	for i, rec := range recs {
		if rec.Code != http.StatusOK {
			t.Errorf("request %d: %d, want 200", i, rec.Code)
		}
		if i < 3 && rec.Header().Get("RateLimit-Policy") != "" {
			t.Errorf("skipped request %d has headers %v", i, rec.Header())
		}
	}
}
