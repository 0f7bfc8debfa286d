package grpclimit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/middleware"
)

// TestConfigErrors: configuration no call could be served with is refused
// by every constructor, with an error wrapping algorithms.ErrInvalidOption.
func TestConfigErrors(t *testing.T) {
	l := newLimiter(t, algorithms.FixedWindow, algorithms.PerMinute(1))
	var nilObserver *recorder
	tests := []struct {
		name    string
		limiter algorithms.Limiter
		opts    []grpclimit.Option
	}{
		{"nil limiter", nil, nil},
		{"nil option", l, []grpclimit.Option{nil}},
		{"nil skip", l, []grpclimit.Option{grpclimit.WithSkip(nil)}},
		{"unknown failure policy", l, []grpclimit.Option{grpclimit.WithErrorPolicy(middleware.ErrorPolicy(7))}},
		{"nil pointer observer", l, []grpclimit.Option{grpclimit.WithObserver(nilObserver)}},
		{"zero timeout", l, []grpclimit.Option{grpclimit.WithTimeout(0)}},
		{"negative unavailable delay", l, []grpclimit.Option{grpclimit.WithUnavailableRetryAfter(-time.Second)}},
		{"empty policy name", l, []grpclimit.Option{grpclimit.WithPolicyName("")}},
		{"policy name with a newline", l, []grpclimit.Option{grpclimit.WithPolicyName("a\nb")}},
		{"long policy name", l, []grpclimit.Option{grpclimit.WithPolicyName(strings.Repeat("p", 65))}},
		{"method without slash", l, []grpclimit.Option{grpclimit.WithMethodLimiter("pkg.S/M", "m", l)}},
		{"method with nil limiter", l, []grpclimit.Option{grpclimit.WithMethodLimiter("/pkg.S/M", "m", nil)}},
		{"method with bad policy", l, []grpclimit.Option{grpclimit.WithMethodLimiter("/pkg.S/M", "", l)}},
		{"nil message limiter", l, []grpclimit.Option{grpclimit.WithMessageLimiter(nil)}},
		{"nil clock", l, []grpclimit.Option{grpclimit.WithClock(nil)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err1 := grpclimit.UnaryServerInterceptor(tt.limiter, tt.opts...)
			_, err2 := grpclimit.StreamServerInterceptor(tt.limiter, tt.opts...)
			_, err3 := grpclimit.NewMiddlewareLimiter(tt.limiter, tt.opts...)
			for _, err := range []error{err1, err2, err3} {
				if !errors.Is(err, algorithms.ErrInvalidOption) {
					t.Fatalf("error %v, want one wrapping algorithms.ErrInvalidOption", err)
				}
			}
		})
	}
}

// TestClientConfigErrors: the client interceptors refuse a limiter that
// cannot reserve and settings out of range.
func TestClientConfigErrors(t *testing.T) {
	bucket := newLimiter(t, algorithms.TokenBucket, algorithms.PerMinute(1))
	tests := []struct {
		name    string
		limiter algorithms.Limiter
		opts    []grpclimit.ClientOption
	}{
		{"nil limiter", nil, nil},
		{"window cannot reserve", newLimiter(t, algorithms.FixedWindow, algorithms.PerMinute(1)), nil},
		{"custom limiter", failingLimiter{}, nil},
		{"nil option", bucket, []grpclimit.ClientOption{nil}},
		{"zero delay", bucket, []grpclimit.ClientOption{grpclimit.WithMaxDelay(0)}},
		{"delay over an hour", bucket, []grpclimit.ClientOption{grpclimit.WithMaxDelay(2 * time.Hour)}},
		{"zero timeout", bucket, []grpclimit.ClientOption{grpclimit.WithClientTimeout(0)}},
		{"unknown failure policy", bucket, []grpclimit.ClientOption{grpclimit.WithClientErrorPolicy(9)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err1 := grpclimit.UnaryClientInterceptor(tt.limiter, tt.opts...)
			_, err2 := grpclimit.StreamClientInterceptor(tt.limiter, tt.opts...)
			for _, err := range []error{err1, err2} {
				if !errors.Is(err, algorithms.ErrInvalidOption) {
					t.Fatalf("error %v, want one wrapping algorithms.ErrInvalidOption", err)
				}
			}
		})
	}
	if _, err := grpclimit.UnaryClientInterceptor(bucket, grpclimit.WithClientKey(
		func(context.Context, string, string) string { return "k" })); err != nil {
		t.Fatal(err)
	}
}
