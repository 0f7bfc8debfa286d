package middleware

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// flakyLimiter fails while down is set, and counts the calls it gets.
type flakyLimiter struct {
	mu    sync.Mutex
	down  bool
	calls int
}

func (l *flakyLimiter) Allow(context.Context, string, int) (algorithms.Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.down {
		return algorithms.Result{}, errors.New("connection refused")
	}
	return algorithms.Result{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: time.Second, Period: time.Second}, nil
}

func (l *flakyLimiter) set(down bool) (calls int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.down = down
	calls, l.calls = l.calls, 0
	return calls
}

func TestBreaker(t *testing.T) {
	clock := newFakeClock()
	lim := &flakyLimiter{down: true}
	logger, logs := newLogger()
	h := mustNew(t, lim, WithBreakFor(2*time.Second), WithLogger(logger), withClock(clock.Now))(&okHandler{})

	steps := []struct {
		name      string
		advance   time.Duration
		down      bool
		requests  int
		wantCode  int
		wantCalls int
	}{
		{"one failure does not open it", 0, true, 1, http.StatusServiceUnavailable, 1},
		{"a success ends the run of failures", 0, false, 1, http.StatusOK, 1},
		{"five failures in a row open it", time.Millisecond, true, 5, http.StatusServiceUnavailable, 5},
		{"while open the limiter is not asked", time.Second, true, 5, http.StatusServiceUnavailable, 0},
		{"when the break is over one request probes, and fails", 1500 * time.Millisecond, true, 5, http.StatusServiceUnavailable, 1},
		{"the failed probe starts the break over", 1900 * time.Millisecond, false, 5, http.StatusServiceUnavailable, 0},
		{"a probe that succeeds closes the breaker", 200 * time.Millisecond, false, 5, http.StatusOK, 5},
		{"closed again: every request asks", time.Millisecond, false, 3, http.StatusOK, 3},
	}
	for _, s := range steps {
		clock.Advance(s.advance)
		lim.set(s.down)
		for i := range s.requests {
			if rec := from(h, "/", "192.0.2.1:1000"); rec.Code != s.wantCode {
				t.Fatalf("%s: request %d got %d, want %d", s.name, i, rec.Code, s.wantCode)
			}
		}
		if calls := lim.set(s.down); calls != s.wantCalls {
			t.Fatalf("%s: the limiter was asked %d times, want %d", s.name, calls, s.wantCalls)
		}
	}
	// Each change of state is logged once: open, half-open, open again,
	// half-open, closed.
	if got := strings.Count(logs.String(), "rate limiter breaker"); got != 5 {
		t.Errorf("%d breaker state changes logged, want 5:\n%s", got, logs)
	}
}

func TestBreakerWithFallback(t *testing.T) {
	clock := newFakeClock()
	main := &flakyLimiter{down: true}
	fallback := &flakyLimiter{}
	logger, _ := newLogger()
	h := mustNew(t, main, WithFallback(fallback), WithLogger(logger), withClock(clock.Now))(&okHandler{})
	for range 8 {
		if rec := from(h, "/", "192.0.2.1:1000"); rec.Code != http.StatusOK || rec.Header().Get("X-RateLimit-Limit") != "10" {
			t.Fatalf("with a fallback: %d %v", rec.Code, rec.Header())
		}
	}
	// Five failures open the breaker; then the fallback alone decides.
	if m, f := main.set(true), fallback.set(false); m != 5 || f != 8 {
		t.Fatalf("main asked %d times, fallback %d; want 5 and 8", m, f)
	}
}

func TestBreakerOff(t *testing.T) {
	lim := &flakyLimiter{down: true}
	logger, _ := newLogger()
	h := mustNew(t, lim, WithBreakFor(0), WithErrorPolicy(PassOnError), WithLogger(logger))(&okHandler{})
	for range 8 {
		if rec := from(h, "/", "192.0.2.1:1000"); rec.Code != http.StatusOK {
			t.Fatalf("fail open: %d", rec.Code)
		}
	}
	if calls := lim.set(true); calls != 8 {
		t.Fatalf("without a breaker the limiter was asked %d times, want 8", calls)
	}
}

// A deadline on the request's own context (from a server or an outer
// middleware) that passes during the decision is a timeout like any other:
// the failure policy answers, never an empty 200. Only a client that went
// away gets no answer.
func TestParentDeadlineAppliesPolicy(t *testing.T) {
	for _, tt := range []struct {
		name       string
		policy     ErrorPolicy
		wantCode   int
		wantServed bool
	}{
		{"fail closed", RefuseOnError, http.StatusServiceUnavailable, false},
		{"fail open", PassOnError, http.StatusOK, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := newLogger()
			next := &okHandler{}
			h := mustNew(t, &blockingLimiter{}, WithTimeout(time.Minute), WithErrorPolicy(tt.policy), WithLogger(logger))(next)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
			req.RemoteAddr = "192.0.2.1:1000"
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantCode || (next.count() == 1) != tt.wantServed {
				t.Fatalf("status %d, served %v; want %d, %v", rec.Code, next.count() == 1, tt.wantCode, tt.wantServed)
			}
		})
	}
}
