package middleware

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
)

// recordingObserver keeps what it hears.
type recordingObserver struct {
	mu        sync.Mutex
	decisions []Decision
	breakers  []bool
}

func (o *recordingObserver) Decision(d Decision) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.decisions = append(o.decisions, d)
}

func (o *recordingObserver) BreakerChanged(_ string, open bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.breakers = append(o.breakers, open)
}

func (o *recordingObserver) outcomes() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, d := range o.decisions {
		out = append(out, d.Outcome)
	}
	return out
}

func TestShadow(t *testing.T) {
	clock := storetest.NewManualClock(epoch)
	lim := newLimiter(t, must(memstore.New(memstore.WithClock(clock.Now))), algorithms.FixedWindow, algorithms.PerMinute(2))
	obs := &recordingObserver{}
	logger, logs := newLogger()
	next := &okHandler{}
	cost := func(r *http.Request) int {
		if r.URL.Query().Get("cost") == "0" {
			return 0
		}
		return 1
	}
	h := mustNew(t, lim, WithShadow(true), WithObserver(obs), WithLogger(logger), WithClock(clock.Now), WithCost(cost),
		WithKeyFunc(keyfunc.APIKey("X-API-Key", keyfunc.KnownAPIKey(func(raw string) bool { return raw == "k" }))))(next)
	for i := range 5 {
		rec := from(h, "/", "192.0.2.1:1", "X-API-Key", "k")
		if rec.Code != http.StatusOK {
			t.Fatalf("request %d: %d in shadow mode", i, rec.Code)
		}
		for name := range rec.Header() {
			if strings.Contains(strings.ToLower(name), "ratelimit") || name == "Retry-After" {
				t.Errorf("request %d: header %s in shadow mode", i, name)
			}
		}
	}
	// Nothing else refuses either.
	if rec := from(h, "/", "192.0.2.1:1"); rec.Code != http.StatusOK {
		t.Errorf("no API key: %d in shadow mode", rec.Code)
	}
	if rec := from(h, "/?cost=0", "192.0.2.1:1", "X-API-Key", "k"); rec.Code != http.StatusOK {
		t.Errorf("cost 0: %d in shadow mode", rec.Code)
	}
	want := []string{OutcomeAllowed, OutcomeAllowed, OutcomeShadowDenied, OutcomeShadowDenied, OutcomeShadowDenied, OutcomeKeyError, OutcomeInvalid}
	if got := obs.outcomes(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	if next.count() != 7 {
		t.Errorf("handler ran %d times, want 7", next.count())
	}
	// Would-be denials are logged at most once a second, without the key.
	if n := strings.Count(logs.String(), "would have denied"); n != 1 {
		t.Errorf("%d shadow log lines in one second, want 1: %s", n, logs)
	}
	clock.Advance(1500 * time.Millisecond)
	from(h, "/", "192.0.2.1:1", "X-API-Key", "k")
	if n := strings.Count(logs.String(), "would have denied"); n != 2 || !strings.Contains(logs.String(), "suppressed=2") {
		t.Errorf("after a second: %d lines, want 2 with suppressed=2: %s", n, logs)
	}
	if strings.Contains(logs.String(), "192.0.2.1") || strings.Contains(logs.String(), keyfunc.HashAPIKey("k")) {
		t.Errorf("the log holds the key: %s", logs)
	}
}

func TestObserver(t *testing.T) {
	clock := storetest.NewManualClock(epoch)
	lim := newLimiter(t, must(memstore.New(memstore.WithClock(clock.Now))), algorithms.TokenBucket, algorithms.PerMinute(1))
	obs := &recordingObserver{}
	h := mustNew(t, lim, WithObserver(obs), WithPolicyName("search"), WithClock(clock.Now))(&okHandler{})
	from(h, "/", "192.0.2.1:1")
	from(h, "/", "192.0.2.1:1")
	from(h, "/", "not an address")
	if got, want := obs.outcomes(), []string{OutcomeAllowed, OutcomeDenied, OutcomeKeyError}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	d := obs.decisions[0]
	if d.Policy != "search" || d.Store != "memory" || d.Duration <= 0 {
		t.Errorf("decision %+v", d)
	}
	if d := obs.decisions[2]; d.Store != "" || d.Duration != 0 {
		t.Errorf("a key error names a store or a duration: %+v", d)
	}

	// A custom limiter that fails: fail_closed, then the breaker opens and
	// the observer hears of it; then it closes again.
	flaky := &flakyLimiter{down: true}
	obs = &recordingObserver{}
	logger, _ := newLogger()
	h = mustNew(t, flaky, WithObserver(obs), WithLogger(logger), WithClock(clock.Now), WithKeyFunc(headerKey))(&okHandler{})
	for range 6 {
		get(h, "/", "c")
	}
	flaky.set(false)
	clock.Advance(2 * time.Second)
	get(h, "/", "c")
	outs := obs.outcomes()
	if len(outs) != 7 || outs[0] != OutcomeFailClosed || outs[5] != OutcomeFailClosed || outs[6] != OutcomeAllowed || obs.decisions[0].Store != "custom" {
		t.Errorf("outcomes %v", outs)
	}
	if len(obs.breakers) != 2 || !obs.breakers[0] || obs.breakers[1] {
		t.Errorf("breaker changes %v, want open then closed", obs.breakers)
	}
}

// While the breaker is open the limiter is not asked, so the observer hears
// of those requests with no store and no duration: only the limiter's own
// decisions add samples to the duration histogram.
func TestObserverBreakerAsksNoLimiter(t *testing.T) {
	for _, tc := range []struct {
		policy ErrorPolicy
		want   string
	}{
		{RefuseOnError, OutcomeFailClosed},
		{PassOnError, OutcomeFailOpen},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			clock := storetest.NewManualClock(epoch)
			flaky := &flakyLimiter{down: true}
			obs := &recordingObserver{}
			logger, _ := newLogger()
			h := mustNew(t, flaky, WithObserver(obs), WithErrorPolicy(tc.policy), WithLogger(logger),
				WithClock(clock.Now), WithKeyFunc(headerKey))(&okHandler{})
			for range 8 {
				get(h, "/", "c")
			}
			calls := flaky.set(false)
			if len(obs.breakers) != 1 || calls >= 8 {
				t.Fatalf("breaker changes %v after %d calls of 8 requests, want it open", obs.breakers, calls)
			}
			asked := 0
			for i, d := range obs.decisions {
				if d.Outcome != tc.want {
					t.Errorf("decision %d: %+v, want %s", i, d, tc.want)
				}
				switch {
				case d.Store == "custom" && d.Duration > 0:
					asked++
				case d.Store != "" || d.Duration != 0:
					t.Errorf("decision %d: %+v, want store custom with a duration, or neither", i, d)
				}
			}
			if len(obs.decisions) != 8 || asked != calls {
				t.Errorf("%d decisions, %d with a store, for %d calls of the limiter; want 8 and %d", len(obs.decisions), asked, calls, calls)
			}
		})
	}
}

func TestObservedDuration(t *testing.T) {
	// Decision.Duration spans the limiter's call, on the default clock
	// (whose one reading after the decision the observer shares) and on
	// another.
	const slow = 20 * time.Millisecond
	for _, tt := range []struct {
		name string
		opts []Option
	}{
		{"default clock", nil},
		{"own clock", []Option{WithClock(func() time.Time { return epoch })}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obs := &recordingObserver{}
			lim := sleepyLimiter{allowOnly{mustLimiter(t, nil, algorithms.PerMinute(5))}, slow}
			h := mustNew(t, lim, append(tt.opts, WithObserver(obs))...)(trivial)
			if rec := from(h, "/", "192.0.2.1:1234"); rec.Code != http.StatusNoContent {
				t.Fatalf("status %d", rec.Code)
			}
			if len(obs.decisions) != 1 {
				t.Fatalf("%d decisions observed, want 1", len(obs.decisions))
			}
			// Generous above: a loaded machine may oversleep.
			if d := obs.decisions[0].Duration; d < slow || d > slow+5*time.Second {
				t.Errorf("Duration %v, want about %v", d, slow)
			}
		})
	}
}

// sleepyLimiter takes its time to decide.
type sleepyLimiter struct {
	allowOnly
	sleep time.Duration
}

func (l sleepyLimiter) Allow(ctx context.Context, key string, cost int) (algorithms.Result, error) {
	time.Sleep(l.sleep)
	return l.allowOnly.Allow(ctx, key, cost)
}
