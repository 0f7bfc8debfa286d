package middleware

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// checkRefused fails t unless New (or NewConcurrency) refused its
// configuration: no middleware, and an error wrapping algorithms.ErrInvalidOption
// that contains want.
func checkRefused(t *testing.T, mw func(http.Handler) http.Handler, err error, want string) {
	t.Helper()
	if !errors.Is(err, algorithms.ErrInvalidOption) {
		t.Fatalf("err %v, want algorithms.ErrInvalidOption", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("err %q does not say %q", err, want)
	}
	if mw != nil {
		t.Error("a middleware beside the error")
	}
}

// Configuration that no request could be served with is refused by New,
// with an error that says what is wrong, never a panic.
func TestMisconfiguration(t *testing.T) {
	lim := stubLimiter{}
	var typedNil *counterLimiter
	tests := []struct {
		name    string
		limiter algorithms.Limiter
		opts    []Option
		want    string // in the error
	}{
		{"nil limiter", nil, nil, "nil limiter"},
		{"typed-nil limiter", typedNil, nil, "nil limiter"},
		{"typed-nil fallback", lim, []Option{WithFallback(typedNil)}, "nil fallback"},
		{"nil option", lim, []Option{WithTimeout(time.Second), nil}, "is nil"},
		{"zero timeout", lim, []Option{WithTimeout(0)}, "timeout"},
		{"negative timeout", lim, []Option{WithTimeout(-time.Second)}, "timeout"},
		{"negative breaker time", lim, []Option{WithBreakFor(-time.Second)}, "breaker"},
		{"unknown failure policy", lim, []Option{WithErrorPolicy(7)}, "failure policy"},
		{"unknown reset mode", lim, []Option{WithResetMode(9)}, "reset mode"},
		{"empty policy name", lim, []Option{WithPolicyName("")}, "policy name"},
		{"non-ASCII policy name", lim, []Option{WithPolicyName("Minüte")}, "policy name"},
		{"control character in policy name", lim, []Option{WithPolicyName("a\nb")}, "policy name"},
		{"policy name too long", lim, []Option{WithPolicyName(strings.Repeat("p", 65))}, "policy name"},
		{"nil clock", lim, []Option{WithClock(nil)}, "clock"},
		{"typed-nil observer", lim, []Option{WithObserver((*recordingObserver)(nil))}, "observer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := newLogger()
			mw, err := New(tt.limiter, append([]Option{WithLogger(logger)}, tt.opts...)...)
			checkRefused(t, mw, err, tt.want)
		})
	}

	// The limits of the valid range are accepted.
	for _, opts := range [][]Option{
		{WithPolicyName(strings.Repeat("~", 64))},
		{WithPolicyName(" !\"\\~"), WithTimeout(time.Nanosecond)},
	} {
		if _, err := New(lim, opts...); err != nil {
			t.Errorf("New: %v", err)
		}
	}
}

// Configuration no concurrency limit could be served with is refused by
// NewConcurrency, never a panic.
func TestConcurrencyMisconfiguration(t *testing.T) {
	lim := newConcurrencyLimiter(t, 1)
	var typedNil *nilConcurrency
	for _, tc := range []struct {
		name    string
		limiter algorithms.ConcurrencyLimiter
		opts    []Option
		want    string // in the error
	}{
		{"nil limiter", nil, nil, "nil concurrency limiter"},
		{"typed-nil limiter", typedNil, nil, "nil concurrency limiter"},
		{"nil option", lim, []Option{nil}, "is nil"},
		{"cost", lim, []Option{WithCost(func(*http.Request) int { return 2 })}, "WithCost"},
		{"limiter func", lim, []Option{WithLimiterFunc(func(*http.Request, string) algorithms.Limiter { return nil })}, "WithLimiterFunc"},
		{"fallback", lim, []Option{WithFallback(stubLimiter{})}, "WithFallback"},
		{"delay", lim, []Option{WithDelay(time.Second)}, "WithDelay"},
		{"charge if", lim, []Option{WithChargeIf(func(int) bool { return true })}, "WithChargeIf"},
		{"cost after", lim, []Option{WithCostAfter()}, "WithCostAfter"},
		{"zero timeout", lim, []Option{WithTimeout(0)}, "timeout"},
		{"unknown failure policy", lim, []Option{WithErrorPolicy(7)}, "failure policy"},
		{"bad policy name", lim, []Option{WithPolicyName("a\nb")}, "policy name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := newLogger()
			mw, err := NewConcurrency(tc.limiter, append([]Option{WithLogger(logger)}, tc.opts...)...)
			checkRefused(t, mw, err, tc.want)
		})
	}
}

// Wrapping a nil handler panics at once, naming the mistake, as
// http.ServeMux.Handle does: no request is ever served by a middleware
// with nothing to pass it on to.
func TestNilHandlerPanics(t *testing.T) {
	rate := mustNew(t, stubLimiter{})
	conc := mustNewConcurrency(t, newConcurrencyLimiter(t, 1))
	for _, tc := range []struct {
		name string
		mw   func(http.Handler) http.Handler
		next http.Handler
	}{
		{"New, nil", rate, nil},
		{"New, nil HandlerFunc", rate, http.HandlerFunc(nil)},
		{"NewConcurrency, nil", conc, nil},
		{"NewConcurrency, nil HandlerFunc", conc, http.HandlerFunc(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if p := recover(); p != "middleware: nil handler" {
					t.Errorf("recovered %v, want the nil handler panic", p)
				}
			}()
			tc.mw(tc.next)
		})
	}
}
