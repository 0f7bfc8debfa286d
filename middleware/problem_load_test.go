package middleware

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
)

func TestProblemHeaderBytesUnderLoad(t *testing.T) {
	// Many requests at once, admitted and refused every way, behind an
	// outer middleware that keeps each response's header map and writes a
	// token of its own into every value once the response is done. If two
	// responses shared any value's storage, one's token would show in the
	// other's kept map, or in what the other sent (and -race would see it).
	const (
		workers  = 8
		requests = 240
		quota    = 20 // per client and hour
	)
	quiet := WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	apiKey := WithKeyFunc(keyfunc.APIKey("X-API-Key"))
	rateLimit := func(t *testing.T, opts ...Option) func(http.Handler) http.Handler {
		clock := storetest.NewManualClock(epoch)
		lim := newLimiter(t, must(memstore.New(memstore.WithClock(clock.Now))), algorithms.FixedWindow, algorithms.PerHour(quota))
		return mustNew(t, lim, append([]Option{WithClock(clock.Now), apiKey}, opts...)...)
	}
	concurrency := func(t *testing.T) func(http.Handler) http.Handler {
		return mustNewConcurrency(t, newConcurrencyLimiter(t, 1), apiKey)
	}
	for _, tt := range []struct {
		name   string
		stack  func(t *testing.T, h http.Handler) http.Handler
		hold   bool  // admitted requests wait until half the requests are done; some 429s are the concurrency limit's
		status []int // each must be seen, and no other
	}{
		{name: "rate limit, credential failures counted",
			stack:  func(t *testing.T, h http.Handler) http.Handler { return rateLimit(t)(h) },
			status: []int{http.StatusOK, http.StatusUnauthorized, http.StatusTooManyRequests}},
		{name: "rate limit, credential failures not counted",
			stack: func(t *testing.T, h http.Handler) http.Handler {
				return rateLimit(t, WithCountCredentialFailures(false))(h)
			},
			status: []int{http.StatusOK, http.StatusUnauthorized, http.StatusTooManyRequests}},
		{name: "concurrency limit", hold: true,
			stack:  func(t *testing.T, h http.Handler) http.Handler { return concurrency(t)(h) },
			status: []int{http.StatusOK, http.StatusUnauthorized, http.StatusTooManyRequests}},
		{name: "rate limit outside concurrency limit", hold: true,
			stack:  func(t *testing.T, h http.Handler) http.Handler { return rateLimit(t)(concurrency(t)(h)) },
			status: []int{http.StatusOK, http.StatusUnauthorized, http.StatusTooManyRequests}},
		{name: "limiter down, failing closed",
			stack: func(t *testing.T, h http.Handler) http.Handler {
				lim := stubLimiter{err: fmt.Errorf("store: %w", io.ErrUnexpectedEOF)}
				return mustNew(t, lim, apiKey, WithCountCredentialFailures(false),
					WithErrorPolicy(RefuseOnError), WithBreakFor(0), WithUnavailableRetryAfter(time.Second), quiet)(h)
			},
			status: []int{http.StatusUnauthorized, http.StatusServiceUnavailable}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var done atomic.Int64
			held := make(chan struct{})
			var closeHeld sync.Once
			handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if tt.hold {
					select {
					case <-held:
					case <-time.After(10 * time.Second):
					}
				}
				_, _ = io.WriteString(w, "ok") // the recorder keeps the fields sent
			})
			kept := make([]http.Header, requests)
			h := tt.stack(t, handler)
			outer := func(i int) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					h.ServeHTTP(w, r)
					token := "scribbled-" + strconv.Itoa(i)
					for _, vs := range w.Header() {
						for j := range vs {
							vs[j] = token
						}
					}
					kept[i] = w.Header()
				})
			}
			recs := make([]*httptest.ResponseRecorder, requests)
			next := make(chan int)
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range next {
						// Two clients with keys, a third with none.
						client := i % 3
						var headers []string
						if client < 2 {
							headers = []string{"X-API-Key", "client-" + strconv.Itoa(client)}
						}
						recs[i] = from(outer(i), "/", fmt.Sprintf("198.51.100.%d:1234", client+1), headers...)
						if done.Add(1) == requests/2 {
							closeHeld.Do(func() { close(held) })
						}
					}
				}()
			}
			for i := range requests {
				next <- i
			}
			close(next)
			wg.Wait()

			seen := map[int]int{}
			leaseDenials := 0
			for i, rec := range recs {
				seen[rec.Code]++
				if rec.Code == http.StatusTooManyRequests && strings.Contains(strings.Join(rec.Result().Header["Ratelimit"], ","), `"concurrency"`) {
					leaseDenials++
				}
				if err := checkSent(rec); err != nil {
					t.Errorf("response %d: %v", i, err)
				}
				token := "scribbled-" + strconv.Itoa(i)
				for name, vs := range kept[i] {
					for _, v := range vs {
						if v != token {
							t.Errorf("response %d's kept %s is %q, want %q", i, name, v, token)
						}
					}
				}
			}
			if tt.hold && leaseDenials == 0 {
				t.Errorf("no 429 from the concurrency limit; saw %v", seen)
			}
			for _, code := range tt.status {
				if seen[code] == 0 {
					t.Errorf("no response with status %d; saw %v", code, seen)
				}
				delete(seen, code)
			}
			if len(seen) > 0 {
				t.Errorf("unexpected statuses %v", seen)
			}
		})
	}
}

// checkSent checks the fields a response sent, as the recorder saw them
// when the status was written.
func checkSent(rec *httptest.ResponseRecorder) error {
	got := rec.Result().Header
	for name, vs := range got {
		for _, v := range vs {
			if strings.Contains(v, "scribbled") {
				return fmt.Errorf("status %d sent %s %q", rec.Code, name, v)
			}
		}
	}
	if rec.Code == http.StatusOK {
		return nil
	}
	want := map[string]string{"Content-Type": "application/problem+json", "Cache-Control": "no-store"}
	switch rec.Code {
	case http.StatusUnauthorized:
		want["Www-Authenticate"] = "APIKey"
	case http.StatusServiceUnavailable:
		want["Retry-After"] = "1"
	}
	for name, v := range want {
		if vs := got[name]; len(vs) != 1 || vs[0] != v {
			return fmt.Errorf("status %d sent %s %q, want %q", rec.Code, name, vs, v)
		}
	}
	if rec.Code == http.StatusTooManyRequests {
		if n, err := strconv.Atoi(got.Get("Retry-After")); err != nil || n < 1 {
			return fmt.Errorf("429 sent Retry-After %q", got.Get("Retry-After"))
		}
	}
	return nil
}
