package middleware

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
)

// epoch is the fake clocks' start: a whole second plus 250 ms, so that
// rounding up is visible in X-RateLimit-Reset.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 250_000_000, time.UTC)

// newFakeClock returns a clock that moves only when told, from epoch.
func newFakeClock() *storetest.ManualClock { return storetest.NewManualClock(epoch) }

// withClock sets the clock X-RateLimit-Reset and the log gate read.
func withClock(now func() time.Time) Option {
	return func(c *config) { c.now = now }
}

// counterLimiter is a deterministic fixed-window limiter on a fake clock: a
// key's window starts with its first request and lasts period. It refuses
// keys, costs and contexts the way the algorithms package documents.
type counterLimiter struct {
	clock  *storetest.ManualClock
	limit  int
	period time.Duration

	mu      sync.Mutex
	windows map[string]*window
	keys    []string
}

type window struct {
	start time.Time
	used  int
}

func newCounter(clock *storetest.ManualClock, limit int, period time.Duration) *counterLimiter {
	return &counterLimiter{clock: clock, limit: limit, period: period, windows: map[string]*window{}}
}

func (l *counterLimiter) Allow(ctx context.Context, key string, cost int) (algorithms.Result, error) {
	switch {
	case key == "" || len(key) > algorithms.MaxKeyLength:
		return algorithms.Result{}, fmt.Errorf("%w: length %d", algorithms.ErrInvalidKey, len(key))
	case cost < 1:
		return algorithms.Result{}, fmt.Errorf("%w: got %d", algorithms.ErrInvalidCost, cost)
	case cost > l.limit:
		return algorithms.Result{}, fmt.Errorf("%w: cost %d", algorithms.ErrCostExceedsLimit, cost)
	}
	if err := ctx.Err(); err != nil {
		return algorithms.Result{}, err
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, key)
	w := l.windows[key]
	if w == nil || !now.Before(w.start.Add(l.period)) {
		w = &window{start: now}
		l.windows[key] = w
	}
	reset := w.start.Add(l.period).Sub(now)
	res := algorithms.Result{Limit: l.limit, ResetAfter: reset, Period: l.period}
	if w.used+cost > l.limit {
		res.Remaining = l.limit - w.used
		res.RetryAfter = reset
		return res, nil
	}
	w.used += cost
	res.Allowed = true
	res.Remaining = l.limit - w.used
	return res, nil
}

// seenKeys returns the keys Allow was called with.
func (l *counterLimiter) seenKeys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.keys...)
}

// stubLimiter returns the same answer to every request.
type stubLimiter struct {
	res algorithms.Result
	err error
}

func (l stubLimiter) Allow(context.Context, string, int) (algorithms.Result, error) {
	return l.res, l.err
}

// blockingLimiter blocks until its context is done, as a limiter on a hung
// store does, and records the deadline it was given.
type blockingLimiter struct {
	mu          sync.Mutex
	calls       int
	hadDeadline bool
	deadlineIn  time.Duration
}

func (l *blockingLimiter) Allow(ctx context.Context, _ string, _ int) (algorithms.Result, error) {
	d, ok := ctx.Deadline()
	l.mu.Lock()
	l.calls++
	l.hadDeadline = ok
	l.deadlineIn = time.Until(d)
	l.mu.Unlock()
	<-ctx.Done()
	return algorithms.Result{}, fmt.Errorf("store: %w", ctx.Err())
}

// headerKey keys requests by their X-Client header, so tests pick clients
// without depending on how keyfunc reads addresses.
func headerKey(r *http.Request) (string, error) {
	k := r.Header.Get("X-Client")
	if k == "" {
		return "", errors.New("no X-Client header")
	}
	return k, nil
}

// okHandler answers 200 "ok" and counts the requests it saw.
type okHandler struct {
	mu sync.Mutex
	n  int
}

func (h *okHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	h.n++
	h.mu.Unlock()
	_, _ = w.Write([]byte("ok"))
}

func (h *okHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// get sends a GET for path from client (an X-Client header, and a
// RemoteAddr in the documentation range) through h.
func get(h http.Handler, path, client string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if client != "" {
		r.Header.Set("X-Client", client)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// problemJSON is the body of a problem response, as a client reads it.
type problemJSON struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`
}

// checkProblem asserts that rec is a problem response with status and
// returns its body.
func checkProblem(t *testing.T, rec *httptest.ResponseRecorder, status int) problemJSON {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status %d, want %d; body %s", rec.Code, status, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", cc)
	}
	var p problemJSON
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("body %s: %v", rec.Body, err)
	}
	if p.Status != status {
		t.Errorf("problem status %d, want %d", p.Status, status)
	}
	if p.Title != http.StatusText(status) || p.Detail == "" || p.Type == "" {
		t.Errorf("problem %+v lacks a type, the status title or a detail", p)
	}
	return p
}

// logBuffer collects slog records as text, safely across goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, nil)), b
}

// mustNew is New for tests, failing tb on an error.
func mustNew(tb testing.TB, l algorithms.Limiter, opts ...Option) func(http.Handler) http.Handler {
	tb.Helper()
	mw, err := New(l, opts...)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return mw
}

// mustNewConcurrency is NewConcurrency for tests, failing tb on an error.
func mustNewConcurrency(tb testing.TB, l algorithms.ConcurrencyLimiter, opts ...Option) func(http.Handler) http.Handler {
	tb.Helper()
	mw, err := NewConcurrency(l, opts...)
	if err != nil {
		tb.Fatalf("NewConcurrency: %v", err)
	}
	return mw
}
