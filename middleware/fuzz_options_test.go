package middleware

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
)

// secret marks every internal error text the fuzzed configurations produce:
// none may reach a response.
const secret = "SECRET-internal"

// specReader turns fuzz bytes into choices; past the end it reads zeros.
type specReader struct{ b []byte }

func (r *specReader) done() bool { return len(r.b) == 0 }

func (r *specReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *specReader) int64() int64 {
	var v int64
	for range 8 {
		v = v<<8 | int64(r.byte())
	}
	return v
}

// duration is one of the durations a configuration might hold: zero,
// negative, tiny, usual, extreme, or any.
func (r *specReader) duration() time.Duration {
	switch r.byte() % 8 {
	case 0:
		return 0
	case 1:
		return -time.Second
	case 2:
		return time.Nanosecond
	case 3:
		return 100 * time.Millisecond
	case 4:
		return math.MaxInt64
	case 5:
		return math.MinInt64
	case 6:
		return time.Hour
	}
	return time.Duration(r.int64())
}

func (r *specReader) string() string {
	n := int(r.byte() % 80)
	if n > len(r.b) {
		n = len(r.b)
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// ctxLimiter passes while its context lives, as a store that waits would.
type ctxLimiter struct{}

func (ctxLimiter) Allow(ctx context.Context, _ string, _ int) (algorithms.Result, error) {
	if err := ctx.Err(); err != nil {
		return algorithms.Result{}, fmt.Errorf("%s: %w", secret, err)
	}
	return algorithms.Result{Allowed: true, Limit: 5, Remaining: 4, Period: time.Minute}, nil
}

// describedLimiter is a custom limiter that describes its limits, any
// way it likes.
type describedLimiter struct {
	stubLimiter
	policies []algorithms.Policy
}

func (l describedLimiter) Policies() []algorithms.Policy { return l.policies }

// limiter picks the limiter given to New or WithFallback, or picked by
// WithLimiterFunc.
func (r *specReader) limiter() algorithms.Limiter {
	switch r.byte() % 10 {
	case 9:
		l := describedLimiter{stubLimiter: stubLimiter{res: algorithms.Result{Allowed: r.byte()%2 == 0, Index: int(r.byte()%4) - 1}}}
		for range r.byte() % 4 {
			l.policies = append(l.policies, algorithms.Policy{Quota: int(r.int64()), Window: r.duration()})
		}
		return l
	case 0:
		return nil
	case 1:
		return (*counterLimiter)(nil)
	case 2:
		l, _ := algorithms.New(must(memstore.New()), algorithms.TokenBucket, algorithms.PerMinute(3))
		return l
	case 3:
		l, _ := algorithms.New(must(memstore.New()), algorithms.FixedWindow, algorithms.PerSecond(2), algorithms.PerHour(5))
		return l
	case 4:
		return stubLimiter{err: errors.New(secret + ": the store failed")}
	case 5:
		return stubLimiter{res: algorithms.Result{Allowed: r.byte()%2 == 0, Limit: int(r.int64()), Remaining: int(r.int64()),
			ResetAfter: r.duration(), RetryAfter: r.duration(), Period: r.duration(), Index: int(r.int64()),
			Decider: algorithms.Decider(r.byte())}}
	case 6:
		return stubLimiter{err: fmt.Errorf("%s: %w", secret, algorithms.ErrCostExceedsLimit)}
	case 7:
		return ctxLimiter{}
	}
	return stubLimiter{err: fmt.Errorf("%s: %w", secret, algorithms.ErrInvalidKey)}
}

func (r *specReader) keyFunc() keyfunc.KeyFunc {
	switch r.byte() % 7 {
	case 0:
		return nil
	case 1:
		return headerKey
	case 2:
		return func(*http.Request) (string, error) { return "", errors.New(secret + ": no key") }
	case 3:
		return func(*http.Request) (string, error) { return "", nil }
	case 4:
		return func(*http.Request) (string, error) { return "", fmt.Errorf("%s: %w", secret, keyfunc.ErrNoAPIKey) }
	case 5:
		return func(*http.Request) (string, error) { return strings.Repeat("k", 2000), nil }
	}
	return keyfunc.FirstOf(nil)
}

// option builds one option, nil functions and values out of range included.
func (r *specReader) option() Option {
	switch r.byte() % 25 {
	case 0:
		return nil
	case 1:
		return WithKeyFunc(r.keyFunc())
	case 2:
		if r.byte()%2 == 0 {
			return WithCost(nil)
		}
		cost := int(r.int64())
		return WithCost(func(*http.Request) int { return cost })
	case 3:
		switch r.byte() % 3 {
		case 0:
			return WithLimiterFunc(nil)
		case 1:
			return WithLimiterFunc(func(*http.Request, string) algorithms.Limiter { return nil })
		}
		l := r.limiter()
		return WithLimiterFunc(func(*http.Request, string) algorithms.Limiter { return l })
	case 4:
		return WithTimeout(r.duration())
	case 5:
		return WithErrorPolicy(ErrorPolicy(int8(r.byte())))
	case 6:
		return WithFallback(r.limiter())
	case 7:
		return WithRouteScope(r.byte()%2 == 0)
	case 8:
		return WithBreakFor(r.duration())
	case 9:
		return WithCountCredentialFailures(r.byte()%2 == 0)
	case 10:
		return WithCredentialFailureKey(r.keyFunc())
	case 11:
		return WithUnavailableRetryAfter(r.duration())
	case 12:
		return WithLogger(nil)
	case 13:
		return WithLegacyHeaders(r.byte()%2 == 0)
	case 14:
		return WithIETFHeaders(r.byte()%2 == 0)
	case 15:
		return WithResetMode(ResetMode(int8(r.byte())))
	case 16:
		return WithPolicyName(r.string())
	case 17:
		if r.byte()%2 == 0 {
			return WithDeniedHandler(nil)
		}
		return WithDeniedHandler(func(w http.ResponseWriter, _ *http.Request, _ algorithms.Result) {
			w.WriteHeader(http.StatusTooManyRequests)
		})
	case 18:
		if r.byte()%2 == 0 {
			return WithKeyErrorHandler(nil)
		}
		return WithKeyErrorHandler(func(w http.ResponseWriter, _ *http.Request, _ error) {
			w.WriteHeader(http.StatusBadRequest)
		})
	case 19:
		switch r.byte() % 3 {
		case 0:
			return WithObserver(nil)
		case 1:
			return WithObserver((*recordingObserver)(nil))
		}
		return WithObserver(&recordingObserver{})
	case 20:
		return WithShadow(r.byte()%2 == 0)
	case 21:
		switch r.byte() % 4 {
		case 0:
			return WithClock(nil)
		case 1:
			return WithClock(func() time.Time { return time.Time{} })
		case 2:
			return WithClock(func() time.Time { return time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC) })
		}
		return WithClock(time.Now)
	case 22:
		return WithDelay(r.duration())
	case 23:
		return WithMaxDelayed(int(r.int64()))
	}
	return WithCost(func(*http.Request) int { return 1 })
}

// FuzzOptions builds the middleware from any list of options, nil
// functions, typed-nil limiters and observers, zero, negative and extreme
// durations and out-of-range values included, and serves a request through
// it. Never a panic from the options: New refuses what no request could be
// served with, with an error wrapping algorithms.ErrInvalidOption; only wrapping a nil
// handler panics, with its own message. Otherwise a documented status,
// well-formed numbers in the headers, and no internal error text anywhere
// in the response.
func FuzzOptions(f *testing.F) {
	f.Add([]byte{2}, "client", false)
	f.Add([]byte{0}, "client", false)
	f.Add([]byte{1, 0}, "", false)
	f.Add([]byte{4, 0, 4}, "c", false)
	f.Add([]byte{2, 4, 2, 8, 5, 11, 4, 16, 3, 'a', 'b', 'c'}, "c", true)
	f.Add([]byte{7, 6, 4, 1, 3}, "c", false)
	f.Add([]byte{5, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 2}, "c", false)
	f.Add([]byte{2, 19, 1}, "c", false)
	f.Add([]byte{2, 21, 0}, "c", false)
	f.Add([]byte{2, 21, 1, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "c", false)
	f.Add([]byte{4, 20, 0, 1, 2}, "", false)
	f.Add([]byte{3, 3, 2, 6, 4, 8, 4, 1, 5}, "c", false)
	f.Add([]byte{9, 1, 2, 3, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 0x80, 0, 0, 0, 0, 0, 0, 0, 5}, "c", false)
	f.Add([]byte{2, 22, 3, 23, 0, 0, 0, 0, 0, 0, 0, 2}, "c", false)
	f.Add([]byte{3, 22, 3}, "c", false)
	f.Add([]byte{2, 22, 4}, "c", false)

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	number := regexp.MustCompile(`^\d+$`)
	documented := map[int]bool{
		http.StatusNoContent: true, http.StatusBadRequest: true, http.StatusUnauthorized: true,
		http.StatusRequestEntityTooLarge: true, http.StatusTooManyRequests: true, http.StatusServiceUnavailable: true,
	}
	f.Fuzz(func(t *testing.T, spec []byte, client string, nilNext bool) {
		r := &specReader{b: spec}
		limiter := r.limiter()
		var opts []Option
		for !r.done() && len(opts) < 32 {
			opts = append(opts, r.option())
		}
		opts = append(opts, WithLogger(quiet))
		mw, err := New(limiter, opts...)
		if err != nil {
			if !errors.Is(err, algorithms.ErrInvalidOption) || mw != nil {
				t.Fatalf("New: %v, want only an error wrapping algorithms.ErrInvalidOption", err)
			}
			return
		}
		if nilNext {
			defer func() {
				if p := recover(); p != "middleware: nil handler" {
					t.Fatalf("wrapping a nil handler: recovered %v, want the nil handler panic", p)
				}
			}()
			mw(nil)
			t.Fatal("wrapping a nil handler did not panic")
		}
		h := mw(trivial)

		req := httptest.NewRequest(http.MethodGet, "/", nil)
		if client != "" {
			req.Header["X-Client"] = []string{client}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		if !documented[rec.Code] {
			t.Fatalf("status %d", rec.Code)
		}
		if strings.Contains(rec.Body.String(), secret) {
			t.Fatalf("body tells an internal error: %q", rec.Body)
		}
		for name, vs := range rec.Header() {
			for _, v := range vs {
				if strings.Contains(v, secret) || strings.ContainsAny(v, "\r\n") {
					t.Fatalf("%s: %q", name, v)
				}
				switch name {
				case hdrLimit, hdrRemaining, hdrReset, hdrRetryAfter:
					if !number.MatchString(v) {
						t.Fatalf("%s: %q is no whole number", name, v)
					}
				case hdrPolicy, hdrRateLimit:
					if strings.Contains(v, "=-") {
						t.Fatalf("%s: %q has a negative parameter", name, v)
					}
				}
			}
		}
	})
}
