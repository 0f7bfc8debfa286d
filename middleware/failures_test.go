package middleware

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

func TestKeyFuncFailure(t *testing.T) {
	const secret = "sk_live_0123456789abcdef"
	leaky := func(r *http.Request) (string, error) {
		return "", fmt.Errorf("bad key %q", secret)
	}
	tests := []struct {
		name   string
		kf     func(*http.Request) (string, error)
		status int
	}{
		{"other error", leaky, http.StatusBadRequest},
		{"empty key", func(*http.Request) (string, error) { return "", nil }, http.StatusBadRequest},
		{"key too long", func(*http.Request) (string, error) { return strings.Repeat("k", 2000), nil }, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := &okHandler{}
			lim := newCounter(newFakeClock(), 10, time.Minute)
			h := mustNew(t, lim, WithKeyFunc(tt.kf))(next)
			rec := get(h, "/", "")
			checkProblem(t, rec, tt.status)
			if strings.Contains(rec.Body.String(), secret) || strings.Contains(fmt.Sprint(rec.Header()), secret) {
				t.Errorf("response echoes the key error: %v %s", rec.Header(), rec.Body)
			}
			if next.count() != 0 {
				t.Error("the request passed")
			}
			if rec.Header().Get("X-RateLimit-Limit") != "" {
				t.Error("rate-limit headers on a request no limit was applied to")
			}
		})
	}

	t.Run("custom handler", func(t *testing.T) {
		var got error
		h := mustNew(t, newCounter(newFakeClock(), 10, time.Minute), WithKeyFunc(leaky),
			WithKeyErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
				got = err
				http.Error(w, "who are you", http.StatusForbidden)
			}))(&okHandler{})
		rec := get(h, "/", "")
		if rec.Code != http.StatusForbidden || got == nil {
			t.Errorf("status %d, handler saw %v", rec.Code, got)
		}
	})
}

func TestLimiterFailure(t *testing.T) {
	// The error text stands for what a Redis client reports: addresses and
	// such, which must reach the log but never the client.
	storeErr := errors.New("dial tcp 10.1.2.3:6379: connect: connection refused")
	const key = "client-key-4711"
	tests := []struct {
		name       string
		opts       []Option
		status     int
		retryAfter string
		passed     bool
	}{
		{"fail closed by default", nil, http.StatusServiceUnavailable, "1", false},
		{"fail open", []Option{WithErrorPolicy(PassOnError)}, http.StatusOK, "", true},
		{"fail closed", []Option{WithErrorPolicy(RefuseOnError)}, http.StatusServiceUnavailable, "1", false},
		{"fail closed, longer Retry-After", []Option{WithErrorPolicy(RefuseOnError), WithUnavailableRetryAfter(2500 * time.Millisecond)},
			http.StatusServiceUnavailable, "3", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, logs := newLogger()
			next := &okHandler{}
			opts := append([]Option{WithKeyFunc(headerKey), WithLogger(logger)}, tt.opts...)
			h := mustNew(t, stubLimiter{err: fmt.Errorf("algorithms: redis: %w", storeErr)}, opts...)(next)
			rec := get(h, "/", key)
			if tt.passed {
				if rec.Code != http.StatusOK || next.count() != 1 {
					t.Fatalf("status %d, handler ran %d times; want a pass", rec.Code, next.count())
				}
			} else {
				checkProblem(t, rec, tt.status)
				if next.count() != 0 {
					t.Error("the request passed")
				}
			}
			if got := rec.Header().Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
			for _, name := range []string{hdrLimit, hdrRemaining, hdrReset, hdrPolicy, hdrRateLimit} {
				if v := rec.Header().Get(name); v != "" {
					t.Errorf("%s: %q on an undecided request", name, v)
				}
			}
			if body := rec.Body.String(); strings.Contains(body, "10.1.2.3") || strings.Contains(body, "refused") {
				t.Errorf("body leaks the store error: %s", body)
			}
			log := logs.String()
			if !strings.Contains(log, "rate limiter failed") || !strings.Contains(log, "connection refused") ||
				!strings.Contains(log, "key_hash=") {
				t.Errorf("failure not logged with the error and key hash: %q", log)
			}
			if strings.Contains(log, key) {
				t.Errorf("log holds the raw key: %q", log)
			}
		})
	}
}

func TestSlowLimiter(t *testing.T) {
	const timeout = 50 * time.Millisecond
	for _, policy := range []ErrorPolicy{PassOnError, RefuseOnError} {
		t.Run(fmt.Sprint(policy), func(t *testing.T) {
			lim := &blockingLimiter{}
			logger, _ := newLogger()
			next := &okHandler{}
			h := mustNew(t, lim, WithKeyFunc(headerKey), WithTimeout(timeout), WithErrorPolicy(policy), WithLogger(logger))(next)

			start := time.Now()
			rec := get(h, "/", "c")
			took := time.Since(start)

			if took < timeout || took > timeout+time.Second {
				t.Errorf("decided after %s, want just over %s", took, timeout)
			}
			if !lim.hadDeadline || lim.deadlineIn > timeout || lim.deadlineIn <= 0 {
				t.Errorf("limiter saw deadline %v in %s, want within %s", lim.hadDeadline, lim.deadlineIn, timeout)
			}
			switch policy {
			case PassOnError:
				if rec.Code != http.StatusOK || next.count() != 1 {
					t.Errorf("fail open: status %d, passes %d", rec.Code, next.count())
				}
			case RefuseOnError:
				checkProblem(t, rec, http.StatusServiceUnavailable)
				if next.count() != 0 {
					t.Error("fail closed let the request pass")
				}
			}
		})
	}
}

func TestClientGone(t *testing.T) {
	// A client that hangs up mid-decision gets no answer and no log record:
	// the failure is not the limiter's.
	for _, policy := range []ErrorPolicy{PassOnError, RefuseOnError} {
		logger, logs := newLogger()
		next := &okHandler{}
		h := mustNew(t, &blockingLimiter{}, WithKeyFunc(headerKey), WithErrorPolicy(policy), WithLogger(logger))(next)
		ctx, cancel := context.WithCancel(context.Background())
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
		r.Header.Set("X-Client", "c")
		rec := httptest.NewRecorder()
		time.AfterFunc(10*time.Millisecond, cancel)
		h.ServeHTTP(rec, r)
		if rec.Body.Len() != 0 || next.count() != 0 || logs.String() != "" {
			t.Errorf("policy %d: body %q, passes %d, log %q; want nothing", policy, rec.Body, next.count(), logs)
		}
	}
}

func TestFallback(t *testing.T) {
	clock := newFakeClock()
	logger, logs := newLogger()
	broken := stubLimiter{err: errors.New("connection refused")}
	next := &okHandler{}
	h := mustNew(t, broken, WithKeyFunc(headerKey), WithFallback(newCounter(clock, 2, time.Minute)),
		WithErrorPolicy(RefuseOnError), WithLogger(logger), withClock(clock.Now))(next)
	var codes []int
	for range 3 {
		codes = append(codes, get(h, "/", "c").Code)
	}
	if fmt.Sprint(codes) != "[200 200 429]" {
		t.Errorf("statuses %v, want the fallback's [200 200 429]", codes)
	}
	if rec := get(h, "/", "c"); rec.Header().Get("X-RateLimit-Limit") != "2" {
		t.Errorf("headers are not the fallback's: %v", rec.Header())
	}
	if !strings.Contains(logs.String(), "failure_policy=fallback") {
		t.Errorf("primary failure not logged: %q", logs)
	}

	// A failing fallback leaves the failure policy to decide.
	both := mustNew(t, broken, WithKeyFunc(headerKey), WithFallback(broken), WithErrorPolicy(RefuseOnError),
		WithLogger(logger))(next)
	checkProblem(t, get(both, "/", "c"), http.StatusServiceUnavailable)

	// Requests the primary refuses for their cost are not retried.
	costly := mustNew(t, stubLimiter{err: algorithms.ErrCostExceedsLimit}, WithKeyFunc(headerKey),
		WithFallback(newCounter(clock, 100, time.Minute)))(next)
	checkProblem(t, get(costly, "/", "c"), http.StatusRequestEntityTooLarge)
}
