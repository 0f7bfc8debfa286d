package grpclimit_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/middleware"
)

// TestShadow: in shadow mode every call is decided and counted, none is
// refused, no rate-limit metadata is sent, and the observer hears what
// enforcement would have done.
func TestShadow(t *testing.T) {
	rec := &recorder{}
	addr := serveLimited(t, newLimiter(t, algorithms.FixedWindow, algorithms.PerMinute(2)),
		grpclimit.WithShadow(true), grpclimit.WithObserver(rec), grpclimit.WithLogger(slog.New(slog.DiscardHandler)))
	c := dial(t, addr)
	for i := range 5 {
		code, header, _, err := call(t, c)
		if code != codes.OK {
			t.Fatalf("call %d: %v", i, err)
		}
		if len(header.Get("ratelimit")) > 0 {
			t.Fatalf("call %d: rate-limit metadata in shadow mode: %v", i, header)
		}
	}
	if a, d := rec.count(middleware.OutcomeAllowed), rec.count(middleware.OutcomeShadowDenied); a != 2 || d != 3 {
		t.Fatalf("observed %d allowed and %d shadow denied, want 2 and 3", a, d)
	}
}

// TestFailures: a limiter that fails gets Unavailable with RetryInfo and
// retry trailers by default, and lets calls through under FailOpen, without
// metadata; the limiter's error text reaches neither the client nor, but
// through the logger, anyone.
func TestFailures(t *testing.T) {
	tests := []struct {
		name    string
		opts    []grpclimit.Option
		want    codes.Code
		outcome string
	}{
		{"fail closed by default", nil, codes.Unavailable, middleware.OutcomeFailClosed},
		{"fail open", []grpclimit.Option{grpclimit.WithErrorPolicy(middleware.PassOnError)}, codes.OK, middleware.OutcomeFailOpen},
		{"shadow passes a failure", []grpclimit.Option{grpclimit.WithShadow(true)}, codes.OK, middleware.OutcomeFailClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			var logs bytes.Buffer
			opts := append([]grpclimit.Option{grpclimit.WithObserver(rec),
				grpclimit.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))}, tt.opts...)
			c := dial(t, serveLimited(t, failingLimiter{}, opts...))
			code, header, trailer, err := call(t, c)
			if code != tt.want {
				t.Fatalf("%v, want %v", err, tt.want)
			}
			if rec.count(tt.outcome) != 1 {
				t.Errorf("outcomes %v, want %s", rec.outcomes, tt.outcome)
			}
			if len(header.Get("ratelimit")) > 0 {
				t.Errorf("rate-limit metadata %v on a call nothing decided", header)
			}
			if err != nil {
				ri, _ := details(err)
				if ri.GetRetryDelay().AsDuration().Seconds() != 1 || first(trailer, "retry-after") != "1" ||
					first(trailer, "grpc-retry-pushback-ms") != "1000" {
					t.Errorf("RetryInfo %v, trailer %v: want a retry after one second", ri, trailer)
				}
				if strings.Contains(status.Convert(err).Message(), "hunter2") {
					t.Errorf("the limiter's error reached the client: %v", err)
				}
			}
			if !strings.Contains(logs.String(), "rate limiter failed") {
				t.Errorf("log %q, want the failure logged", logs.String())
			}
		})
	}
}

// TestSkip: skipped calls are neither decided nor counted, and need no
// credential.
func TestSkip(t *testing.T) {
	rec := &recorder{}
	addr := serveLimited(t, newLimiter(t, algorithms.FixedWindow, algorithms.PerMinute(1)),
		grpclimit.WithObserver(rec),
		grpclimit.WithSkip(func(_ context.Context, method string) bool { return method == emptyMethod }))
	c := dial(t, addr)
	for range 3 {
		if _, err := c.EmptyCall(context.Background(), emptyMsg()); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, _, _ := call(t, c); code != codes.OK {
		t.Fatalf("UnaryCall after skipped calls: %v", code)
	}
	if rec.count(middleware.OutcomeSkipped) != 3 {
		t.Fatalf("outcomes %v, want 3 skipped", rec.outcomes)
	}
}

// TestCosts: a call's cost is charged; a cost above the whole quota gets
// ResourceExhausted with QuotaFailure, no RetryInfo and a pushback of -1
// (never retry); a cost below 1 gets InvalidArgument.
func TestCosts(t *testing.T) {
	tests := []struct {
		name      string
		cost      int
		want      []codes.Code
		retryInfo bool
	}{
		{"cost 2 of 5", 2, []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted}, true},
		{"cost above the quota", 6, []codes.Code{codes.ResourceExhausted}, false},
		{"cost 0", 0, []codes.Code{codes.InvalidArgument}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := serveLimited(t, newLimiter(t, algorithms.TokenBucket, algorithms.PerMinute(5)),
				grpclimit.WithCost(func(context.Context, string, any) int { return tt.cost }))
			c := dial(t, addr)
			for i, want := range tt.want {
				code, _, trailer, err := call(t, c)
				if code != want {
					t.Fatalf("call %d: %v, want %v", i, err, want)
				}
				if code != codes.ResourceExhausted {
					continue
				}
				ri, qf := details(err)
				if (ri != nil) != tt.retryInfo || qf == nil {
					t.Errorf("RetryInfo %v, QuotaFailure %v: want RetryInfo %v and a QuotaFailure", ri, qf, tt.retryInfo)
				}
				if !tt.retryInfo && (first(trailer, "grpc-retry-pushback-ms") != "-1" || first(trailer, "retry-after") != "") {
					t.Errorf("trailer %v, want a pushback of -1 and no retry-after", trailer)
				}
			}
		})
	}
}
