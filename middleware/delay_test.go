package middleware

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memstore"
)

// delayed builds the middleware around a handler that records when each
// request reached it, since began.
type delayed struct {
	h     *handler
	mu    sync.Mutex
	began time.Time
	at    []time.Duration
}

func newDelayed(t *testing.T, l algorithms.Limiter, opts ...Option) *delayed {
	t.Helper()
	mw := mustNew(t, l, append([]Option{WithKeyFunc(headerKey)}, opts...)...)
	d := &delayed{began: time.Now()}
	d.h = mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		d.mu.Lock()
		d.at = append(d.at, time.Since(d.began))
		d.mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	})).(*handler)
	return d
}

func (d *delayed) served() []time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(slices.Values(d.at))
}

// burst sends n requests from one client at once and returns their
// statuses.
func (d *delayed) burst(n int) map[int]int {
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := get(d.h, "/", "c")
			mu.Lock()
			codes[rec.Code]++
			mu.Unlock()
			if rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
				panic("429 without Retry-After")
			}
		}()
	}
	wg.Wait()
	return codes
}

// Ten requests at once against 10/s burst 1 with WithDelay(500ms): six are
// served, 100ms apart (the store's clock stands still, so the delays are
// exact; the timers are real), four get 429.
func TestDelaySchedule(t *testing.T) {
	for _, alg := range []algorithms.Algorithm{algorithms.LeakyBucket, algorithms.TokenBucket} {
		t.Run(string(alg), func(t *testing.T) {
			clock := storetest.NewManualClock(time.Unix(1_800_000_000, 0))
			l := newLimiter(t, must(memstore.New(memstore.WithClock(clock.Now))), alg, algorithms.PerSecond(10).WithBurst(1))
			d := newDelayed(t, l, WithDelay(500*time.Millisecond))
			codes := d.burst(10)
			if codes[http.StatusOK] != 6 || codes[http.StatusTooManyRequests] != 4 {
				t.Fatalf("statuses %v, want 6 × 200 and 4 × 429", codes)
			}
			for i, at := range d.served() {
				if want := time.Duration(i) * 100 * time.Millisecond; at < want {
					t.Fatalf("request %d served after %s, before its delay %s: %v", i, at, want, d.served())
				}
			}
			if n := d.h.c.waiting.Load(); n != 0 {
				t.Fatalf("%d still counted as waiting", n)
			}
		})
	}
}

// The same against Redis, whose clock moves: five or six pass.
func TestRedisDelaySchedule(t *testing.T) {
	addr := redistest.Standalone(t)
	for _, alg := range []algorithms.Algorithm{algorithms.LeakyBucket, algorithms.TokenBucket} {
		t.Run(string(alg), func(t *testing.T) {
			l := redisLimiter(t, addr, alg, algorithms.PerSecond(10).WithBurst(1))
			d := newDelayed(t, l, WithDelay(500*time.Millisecond), WithPolicyName(string(alg)))
			codes := d.burst(10)
			if ok := codes[http.StatusOK]; ok < 5 || ok > 6 || codes[http.StatusTooManyRequests] != 10-ok {
				t.Fatalf("statuses %v, want 5 or 6 × 200 and the rest 429", codes)
			}
			served := d.served()
			// Ten decisions take far less than 100ms; allow that much slack.
			for i, at := range served {
				if want := time.Duration(i)*100*time.Millisecond - 100*time.Millisecond; at < want {
					t.Fatalf("request %d served after %s: %v", i, at, served)
				}
			}
		})
	}
}

// A delayed request's headers describe the reservation: nothing remains,
// and the quota is whole only once the reserved slots have drained.
func TestDelayHeaders(t *testing.T) {
	clock := storetest.NewManualClock(time.Unix(1_800_000_000, 0))
	l := newLimiter(t, must(memstore.New(memstore.WithClock(clock.Now))), algorithms.LeakyBucket, algorithms.PerSecond(10).WithBurst(1))
	d := newDelayed(t, l, WithDelay(time.Second), WithLegacyHeaders(true), WithResetMode(ResetDelta))
	get(d.h, "/", "c")
	rec := get(d.h, "/", "c") // waits 100ms
	if rec.Code != http.StatusOK || rec.Header().Get("X-RateLimit-Remaining") != "0" || rec.Header().Get("X-RateLimit-Reset") != "1" {
		t.Fatalf("%d %v", rec.Code, rec.Header())
	}
	if at := d.served(); len(at) != 2 || at[1] < 100*time.Millisecond {
		t.Fatalf("served at %v", at)
	}
}

// A client that goes away while it waits: the request is not served, its
// place among the waiting is given back, and its slot is not (the next
// reservation waits behind it).
func TestDelayClientGoesAway(t *testing.T) {
	clock := storetest.NewManualClock(time.Unix(1_800_000_000, 0))
	l := newLimiter(t, must(memstore.New(memstore.WithClock(clock.Now))), algorithms.LeakyBucket, algorithms.PerSecond(1).WithBurst(1))
	d := newDelayed(t, l, WithDelay(10*time.Second))
	if rec := get(d.h, "/", "c"); rec.Code != http.StatusOK {
		t.Fatal(rec.Code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx)
	r.Header.Set("X-Client", "c")
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { d.h.ServeHTTP(rec, r); close(done) }()
	waitFor(t, func() bool { return d.h.c.waiting.Load() == 1 })
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the request still waits after its client went away")
	}
	if n := len(d.served()); n != 1 {
		t.Fatalf("%d requests served, want 1", n)
	}
	if n := d.h.c.waiting.Load(); n != 0 {
		t.Fatalf("%d counted as waiting", n)
	}
	res, err := l.(reserver).Reserve(context.Background(), "c", 1, time.Minute)
	if err != nil || res.Delay != 2*time.Second {
		t.Fatalf("%+v %v: want a delay of 2s, behind the abandoned slot", res, err)
	}
}

// A request whose context's deadline passes while it waits gets 503.
func TestDelayDeadline(t *testing.T) {
	clock := storetest.NewManualClock(time.Unix(1_800_000_000, 0))
	l := newLimiter(t, must(memstore.New(memstore.WithClock(clock.Now))), algorithms.TokenBucket, algorithms.PerSecond(1).WithBurst(1))
	d := newDelayed(t, l, WithDelay(10*time.Second))
	get(d.h, "/", "c")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx)
	r.Header.Set("X-Client", "c")
	rec := httptest.NewRecorder()
	d.h.ServeHTTP(rec, r)
	if rec.Code != http.StatusServiceUnavailable || len(d.served()) != 1 {
		t.Fatalf("status %d, %d served", rec.Code, len(d.served()))
	}
}

// Beyond WithMaxDelayed, a request is decided without delay: 429 at once,
// consuming nothing.
func TestDelayMaxWaiting(t *testing.T) {
	clock := storetest.NewManualClock(time.Unix(1_800_000_000, 0))
	l := newLimiter(t, must(memstore.New(memstore.WithClock(clock.Now))), algorithms.LeakyBucket, algorithms.PerSecond(5).WithBurst(1))
	d := newDelayed(t, l, WithDelay(2*time.Second), WithMaxDelayed(2))
	if rec := get(d.h, "/", "c"); rec.Code != http.StatusOK {
		t.Fatal(rec.Code)
	}
	var wg sync.WaitGroup
	for n := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); get(d.h, "/", "c") }()
		waitFor(t, func() bool { return d.h.c.waiting.Load() == int64(n+1) })
	}
	began := time.Now()
	rec := get(d.h, "/", "c")
	if rec.Code != http.StatusTooManyRequests || time.Since(began) > 150*time.Millisecond {
		t.Fatalf("status %d after %s, want 429 at once", rec.Code, time.Since(began))
	}
	if ra, _ := strconv.Atoi(rec.Header().Get("Retry-After")); ra < 1 {
		t.Fatalf("Retry-After %q", rec.Header().Get("Retry-After"))
	}
	wg.Wait()
	if n := len(d.served()); n != 3 {
		t.Fatalf("%d served, want 3", n)
	}
	// The refused request took no slot: the next waits 600ms, behind the
	// three served at 0, 200 and 400ms.
	res, err := l.(reserver).Reserve(context.Background(), "c", 1, time.Minute)
	if err != nil || res.Delay != 600*time.Millisecond {
		t.Fatalf("%+v %v, want a delay of 600ms", res, err)
	}
}

func TestDelayRefusedAtConstruction(t *testing.T) {
	mem := must(memstore.New())
	bucket := newLimiter(t, mem, algorithms.TokenBucket, algorithms.PerSecond(10))
	tests := []struct {
		name string
		l    algorithms.Limiter
		opts []Option
		want string // in the error
	}{
		{"fixed window", newLimiter(t, mem, algorithms.FixedWindow, algorithms.PerSecond(10)), []Option{WithDelay(time.Second)}, "cannot delay"},
		{"sliding log", newLimiter(t, mem, algorithms.SlidingWindowLog, algorithms.PerSecond(10)), []Option{WithDelay(time.Second)}, "cannot delay"},
		{"sliding counter", newLimiter(t, mem, algorithms.SlidingWindowCounter, algorithms.PerSecond(10)), []Option{WithDelay(time.Second)}, "cannot delay"},
		{"not New's", stubLimiter{}, []Option{WithDelay(time.Second)}, "cannot delay"},
		{"zero", bucket, []Option{WithDelay(0)}, "WithDelay(0s)"},
		{"negative", bucket, []Option{WithDelay(-time.Second)}, "WithDelay(-1s)"},
		{"absurd", bucket, []Option{WithDelay(algorithms.MaxDelay + 1)}, "WithDelay("},
		{"no room to wait", bucket, []Option{WithDelay(time.Second), WithMaxDelayed(0)}, "WithMaxDelayed(0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mw, err := New(tt.l, tt.opts...)
			checkRefused(t, mw, err, tt.want)
		})
	}
	if _, err := New(bucket, WithDelay(time.Second), WithMaxDelayed(1)); err != nil {
		t.Fatal(err)
	}
}

// In shadow mode nothing waits and nothing is reserved.
func TestDelayShadow(t *testing.T) {
	clock := storetest.NewManualClock(time.Unix(1_800_000_000, 0))
	l := newLimiter(t, must(memstore.New(memstore.WithClock(clock.Now))), algorithms.LeakyBucket, algorithms.PerSecond(1).WithBurst(1))
	d := newDelayed(t, l, WithDelay(10*time.Second), WithShadow(true))
	began := time.Now()
	for range 3 {
		if rec := get(d.h, "/", "c"); rec.Code != http.StatusOK {
			t.Fatal(rec.Code)
		}
	}
	if took := time.Since(began); took > time.Second {
		t.Fatalf("shadow requests waited %s", took)
	}
	res, err := l.(reserver).Reserve(context.Background(), "c", 1, time.Minute)
	if err != nil || res.Delay != time.Second {
		t.Fatalf("%+v %v, want a delay of 1s: only the first shadow request charged", res, err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
