package middleware

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
)

// Stacked limiters each add their policy to the IETF fields rather than
// replacing what an outer one set, and no response's fields leak into
// another's.
func TestStackedLimitersListEveryPolicy(t *testing.T) {
	store := must(memstore.New())
	inner := mustNew(t, newLimiter(t, store, algorithms.FixedWindow, algorithms.PerMinute(2), algorithms.PerHour(10)), WithPolicyName("client"))
	outer := mustNew(t, newLimiter(t, store, algorithms.FixedWindow, algorithms.PerMinute(5)), WithPolicyName("network"))
	both := outer(inner(&okHandler{}))
	alone := inner(&okHandler{})
	for i := range 3 {
		rec := from(both, "/", "203.0.113.9:1")
		policies := rec.Header().Values("RateLimit-Policy")
		if len(policies) != 2 || !strings.HasPrefix(policies[0], `"network";q=5`) || !strings.Contains(policies[1], `"client-`) {
			t.Fatalf("request %d: RateLimit-Policy %q, want the network's policy then the client's two", i, policies)
		}
		if got := rec.Header().Values("RateLimit"); len(got) != 2 {
			t.Fatalf("request %d: RateLimit %q, want two items", i, got)
		}
		rec = from(alone, "/", "198.51.100.9:1")
		if got := rec.Header().Values("RateLimit-Policy"); len(got) != 1 || strings.Contains(got[0], "network") {
			t.Fatalf("request %d alone: RateLimit-Policy %q, want the client's only", i, got)
		}
	}
}

// boundedLimiter bounds its decisions itself and records the deadline the
// middleware gave it (-1: none).
type boundedLimiter struct {
	bound    time.Duration
	deadline time.Duration
}

func (l *boundedLimiter) Allow(ctx context.Context, _ string, _ int) (algorithms.Result, error) {
	l.deadline = -1
	if d, ok := ctx.Deadline(); ok {
		l.deadline = time.Until(d)
	}
	return algorithms.Result{Allowed: true, Limit: 1}, nil
}

func (l *boundedLimiter) DecisionTimeout() time.Duration { return l.bound }

// A limiter that bounds its decisions itself (a Redis store's, by its
// WithTimeout) gets the request's context as it is, without a deadline
// (and a timer) of the middleware's, unless WithTimeout asks for a shorter
// one: the default deadline never cuts the store's short.
func TestDefaultTimeoutGivesWayToTheStore(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bound    time.Duration
		opts     []Option
		min, max time.Duration
	}{
		{"longer store timeout", 400 * time.Millisecond, nil, -1, -1},
		{"shorter store timeout", 10 * time.Millisecond, nil, -1, -1},
		{"WithTimeout longer than the store's", 50 * time.Millisecond, []Option{WithTimeout(time.Second)}, -1, -1},
		{"WithTimeout shorter than the store's", 400 * time.Millisecond, []Option{WithTimeout(20 * time.Millisecond)}, 0, 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &boundedLimiter{bound: tc.bound}
			from(mustNew(t, l, tc.opts...)(&okHandler{}), "/", "192.0.2.1:1")
			if l.deadline < tc.min || l.deadline > tc.max {
				t.Errorf("deadline %s from now, want between %s and %s (-1ns: none)", l.deadline, tc.min, tc.max)
			}
		})
	}
}
