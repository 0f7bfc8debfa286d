package middleware

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
)

func TestProblemHeaderBytes(t *testing.T) {
	// The handler never sees the middleware's own answers, but an outer
	// middleware (or a ResponseWriter wrapper) may write into their header
	// values in place once they are sent: the next answer's must be intact.
	scribbler := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			for _, vs := range w.Header() {
				for i := range vs {
					vs[i] = "scribbled"
				}
			}
		})
	}
	quiet := WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	problemFields := http.Header{
		"Content-Type":  {"application/problem+json"},
		"Cache-Control": {"no-store"},
	}
	with := func(more http.Header) http.Header {
		h := problemFields.Clone()
		for k, v := range more {
			h[k] = v
		}
		return h
	}
	for _, tt := range []struct {
		name     string
		limiter  algorithms.Limiter // a memory limit of one an hour when nil
		leases   bool               // a concurrency limit of one instead, held by the first request
		opts     []Option
		headers  []string // of each request
		requests int      // the last one's fields are checked
		status   int
		want     http.Header // fields of the last response
	}{
		{name: "denied", requests: 3, status: http.StatusTooManyRequests,
			want: with(http.Header{"Retry-After": {"3600"}})},
		{name: "denied without rate-limit headers", requests: 3, status: http.StatusTooManyRequests,
			opts: []Option{WithLegacyHeaders(false), WithIETFHeaders(false)},
			want: with(http.Header{"Retry-After": {"3600"}})},
		{name: "key the limiter refuses", requests: 2, status: http.StatusBadRequest,
			limiter: stubLimiter{err: fmt.Errorf("too long: %w", algorithms.ErrInvalidKey)},
			want:    problemFields},
		{name: "misconfigured key function", requests: 2, status: http.StatusBadRequest,
			opts: []Option{WithKeyFunc(keyfunc.APIKey("")), quiet},
			want: problemFields},
		{name: "no API key", requests: 2, status: http.StatusUnauthorized,
			opts: []Option{WithKeyFunc(keyfunc.APIKey("X-API-Key")), WithCountCredentialFailures(false)},
			want: with(http.Header{"Www-Authenticate": {"APIKey"}})},
		{name: "invalid bearer token", requests: 2, status: http.StatusUnauthorized,
			opts:    []Option{WithKeyFunc(bearerSubject), WithCountCredentialFailures(false)},
			headers: []string{"Authorization", "Bearer not-a-token"},
			want:    with(http.Header{"Www-Authenticate": {`Bearer error="invalid_token"`}})},
		{name: "credential guesses over the limit", requests: 3, status: http.StatusTooManyRequests,
			opts: []Option{WithKeyFunc(keyfunc.APIKey("X-API-Key"))},
			want: with(http.Header{"Retry-After": {"3600"}})},
		{name: "concurrency limit full", leases: true, requests: 3, status: http.StatusTooManyRequests,
			want: with(http.Header{"Retry-After": {"1"}})},
		{name: "limiter down, failing closed", requests: 2, status: http.StatusServiceUnavailable,
			limiter: stubLimiter{err: fmt.Errorf("store: %w", io.ErrUnexpectedEOF)},
			opts:    []Option{WithErrorPolicy(RefuseOnError), WithBreakFor(0), quiet},
			want:    with(http.Header{"Retry-After": {"1"}})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := storetest.NewManualClock(epoch)
			lim := tt.limiter
			if lim == nil {
				lim = newLimiter(t, must(memstore.New(memstore.WithClock(clock.Now))), algorithms.FixedWindow, algorithms.PerHour(1))
			}
			opts := append([]Option{WithClock(clock.Now), WithUnavailableRetryAfter(time.Second)}, tt.opts...)
			var rec *httptest.ResponseRecorder
			serve := func(h http.Handler, n int) {
				for range n {
					rec = from(h, "/", "198.51.100.7:1234", tt.headers...)
				}
			}
			var h http.Handler
			if tt.leases {
				// The rest are served while the first holds the lease.
				holder := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { serve(h, tt.requests-1) })
				h = scribbler(mustNewConcurrency(t, newConcurrencyLimiter(t, 1), opts...)(holder))
				from(h, "/", "198.51.100.7:1234", tt.headers...)
			} else {
				h = scribbler(mustNew(t, lim, opts...)(trivial))
				serve(h, tt.requests)
			}
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d", rec.Code, tt.status)
			}
			got := rec.Result().Header // as sent, before the scribbler ran
			for name, want := range tt.want {
				if !slices.Equal(got[name], want) {
					t.Errorf("%s %q, want %q", name, got[name], want)
				}
			}
		})
	}
}
