package middleware

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

func TestCanonicalHeaderNames(t *testing.T) {
	// The hot path assigns to the header map directly, which only works
	// with the names in the form http.Header.Get looks them up in.
	for name, got := range map[string]string{
		"X-RateLimit-Limit":     hdrLimit,
		"X-RateLimit-Remaining": hdrRemaining,
		"X-RateLimit-Reset":     hdrReset,
		"RateLimit-Policy":      hdrPolicy,
		"RateLimit":             hdrRateLimit,
		"Retry-After":           hdrRetryAfter,
		"Cache-Control":         hdrCacheControl,
		"Content-Type":          hdrContentType,
		"WWW-Authenticate":      hdrAuthenticate,
	} {
		if want := textproto.CanonicalMIMEHeaderKey(name); got != want {
			t.Errorf("%s is stored as %q, want %q", name, got, want)
		}
	}
}

func TestHeaders(t *testing.T) {
	unix := epoch.Unix() // epoch is 250 ms past this second
	allHeaders := []string{hdrLimit, hdrRemaining, hdrReset, hdrPolicy, hdrRateLimit, hdrRetryAfter, hdrCacheControl}
	pass := algorithms.Result{Allowed: true, Limit: 100, Remaining: 42, ResetAfter: 16200 * time.Millisecond, Period: time.Minute}
	deny := algorithms.Result{Limit: 100, Remaining: 0, ResetAfter: 30 * time.Second, RetryAfter: 3 * time.Second, Period: time.Minute}

	tests := []struct {
		name   string
		opts   []Option
		res    algorithms.Result
		status int
		want   map[string]string // "" means absent
	}{{
		name:   "pass",
		res:    pass,
		status: http.StatusOK,
		want: map[string]string{
			hdrLimit: "100", hdrRemaining: "42", hdrReset: strconv.FormatInt(unix+17, 10),
			hdrPolicy: `"default";q=100;w=60`, hdrRateLimit: `"default";r=42;t=17`,
		},
	}, {
		name:   "deny",
		res:    deny,
		status: http.StatusTooManyRequests,
		want: map[string]string{
			hdrLimit: "100", hdrRemaining: "0", hdrReset: strconv.FormatInt(unix+31, 10),
			hdrPolicy: `"default";q=100;w=60`, hdrRateLimit: `"default";r=0;t=3`,
			hdrRetryAfter: "3", hdrCacheControl: "no-store",
		},
	}, {
		name:   "deny with a millisecond to wait still says one second",
		res:    algorithms.Result{Limit: 5, ResetAfter: time.Millisecond, RetryAfter: time.Millisecond, Period: 10 * time.Millisecond},
		status: http.StatusTooManyRequests,
		want: map[string]string{
			hdrLimit: "5", hdrRemaining: "0", hdrReset: strconv.FormatInt(unix+1, 10),
			hdrPolicy: `"default";q=5;w=1`, hdrRateLimit: `"default";r=0;t=1`,
			hdrRetryAfter: "1", hdrCacheControl: "no-store",
		},
	}, {
		name:   "deny with no wait given still says one second",
		res:    algorithms.Result{Limit: 5, Period: time.Second},
		status: http.StatusTooManyRequests,
		want: map[string]string{
			hdrLimit: "5", hdrRemaining: "0", hdrReset: strconv.FormatInt(unix+1, 10),
			hdrPolicy: `"default";q=5;w=1`, hdrRateLimit: `"default";r=0;t=1`,
			hdrRetryAfter: "1", hdrCacheControl: "no-store",
		},
	}, {
		name:   "retry after rounds up",
		res:    algorithms.Result{Limit: 10, Remaining: 3, ResetAfter: 5 * time.Second, RetryAfter: 2001 * time.Millisecond, Period: 90500 * time.Millisecond},
		status: http.StatusTooManyRequests,
		want: map[string]string{
			hdrLimit: "10", hdrRemaining: "3", hdrReset: strconv.FormatInt(unix+6, 10),
			hdrPolicy: `"default";q=10;w=91`, hdrRateLimit: `"default";r=3;t=3`,
			hdrRetryAfter: "3", hdrCacheControl: "no-store",
		},
	}, {
		name:   "remaining never negative",
		res:    algorithms.Result{Allowed: true, Limit: 10, Remaining: -4, ResetAfter: time.Second, Period: time.Second},
		status: http.StatusOK,
		want: map[string]string{
			hdrLimit: "10", hdrRemaining: "0", hdrReset: strconv.FormatInt(unix+2, 10),
			hdrPolicy: `"default";q=10;w=1`, hdrRateLimit: `"default";r=0;t=1`,
		},
	}, {
		name:   "zero period and reset",
		res:    algorithms.Result{Allowed: true, Limit: 10, Remaining: 10},
		status: http.StatusOK,
		want: map[string]string{
			hdrLimit: "10", hdrRemaining: "10", hdrReset: strconv.FormatInt(unix+1, 10),
			hdrPolicy: `"default";q=10;w=1`, hdrRateLimit: `"default";r=10;t=0`,
		},
	}, {
		name:   "reset as delta seconds",
		opts:   []Option{WithResetMode(ResetDelta)},
		res:    pass,
		status: http.StatusOK,
		want: map[string]string{
			hdrLimit: "100", hdrRemaining: "42", hdrReset: "17",
			hdrPolicy: `"default";q=100;w=60`, hdrRateLimit: `"default";r=42;t=17`,
		},
	}, {
		name:   "legacy headers off",
		opts:   []Option{WithLegacyHeaders(false)},
		res:    deny,
		status: http.StatusTooManyRequests,
		want: map[string]string{
			hdrPolicy: `"default";q=100;w=60`, hdrRateLimit: `"default";r=0;t=3`,
			hdrRetryAfter: "3", hdrCacheControl: "no-store",
		},
	}, {
		name:   "IETF headers off",
		opts:   []Option{WithIETFHeaders(false)},
		res:    pass,
		status: http.StatusOK,
		want:   map[string]string{hdrLimit: "100", hdrRemaining: "42", hdrReset: strconv.FormatInt(unix+17, 10)},
	}, {
		name:   "both off still sends Retry-After on a deny",
		opts:   []Option{WithIETFHeaders(false), WithLegacyHeaders(false)},
		res:    deny,
		status: http.StatusTooManyRequests,
		want:   map[string]string{hdrRetryAfter: "3", hdrCacheControl: "no-store"},
	}, {
		name:   "both off on a pass",
		opts:   []Option{WithIETFHeaders(false), WithLegacyHeaders(false)},
		res:    pass,
		status: http.StatusOK,
		want:   map[string]string{},
	}, {
		name:   "policy name escaped as an sf-string",
		opts:   []Option{WithPolicyName(`per "IP" \ minute`)},
		res:    pass,
		status: http.StatusOK,
		want: map[string]string{
			hdrLimit: "100", hdrRemaining: "42", hdrReset: strconv.FormatInt(unix+17, 10),
			hdrPolicy:    `"per \"IP\" \\ minute";q=100;w=60`,
			hdrRateLimit: `"per \"IP\" \\ minute";r=42;t=17`,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			opts := append([]Option{WithKeyFunc(headerKey), withClock(clock.Now)}, tt.opts...)
			next := &okHandler{}
			h := mustNew(t, stubLimiter{res: tt.res}, opts...)(next)
			rec := get(h, "/", "c1")
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d", rec.Code, tt.status)
			}
			for _, name := range allHeaders {
				got := rec.Header().Values(name)
				want := tt.want[name]
				switch {
				case want == "" && len(got) != 0:
					t.Errorf("%s: %q, want none", name, got)
				case want != "" && (len(got) != 1 || got[0] != want):
					t.Errorf("%s: %q, want %q", name, got, want)
				}
			}
			if passed := next.count() == 1; passed != tt.res.Allowed {
				t.Errorf("handler ran: %v, want %v", passed, tt.res.Allowed)
			}
		})
	}
}

func TestDenyBody(t *testing.T) {
	for _, name := range []string{"default", `per "IP" \ minute`} {
		h := mustNew(t, stubLimiter{res: algorithms.Result{Limit: 1, RetryAfter: time.Second}},
			WithKeyFunc(headerKey), WithPolicyName(name))(&okHandler{})
		p := checkProblem(t, get(h, "/", "c1"), http.StatusTooManyRequests)
		if p.Type != "https://iana.org/assignments/http-problem-types#quota-exceeded" {
			t.Errorf("type %q", p.Type)
		}
		if len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != name {
			t.Errorf("violated-policies %q, want [%q]", p.ViolatedPolicies, name)
		}
	}
}

func TestExactCount(t *testing.T) {
	for _, limit := range []int{1, 5, 100} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			clock := newFakeClock()
			next := &okHandler{}
			h := mustNew(t, newCounter(clock, limit, time.Minute), WithKeyFunc(headerKey))(next)

			// Concurrent clients, all on one key: exactly limit pass.
			var wg sync.WaitGroup
			var mu sync.Mutex
			codes := map[int]int{}
			for range limit + 20 {
				wg.Go(func() {
					rec := get(h, "/", "same")
					mu.Lock()
					codes[rec.Code]++
					mu.Unlock()
				})
			}
			wg.Wait()
			if codes[http.StatusOK] != limit || codes[http.StatusTooManyRequests] != 20 || next.count() != limit {
				t.Errorf("statuses %v, handler ran %d times; want %d passes and 20 denials", codes, next.count(), limit)
			}
			// Another key has its own count.
			if rec := get(h, "/", "other"); rec.Code != http.StatusOK {
				t.Errorf("another client got %d", rec.Code)
			}
		})
	}
}

func TestRemainingCountsDown(t *testing.T) {
	clock := newFakeClock()
	h := mustNew(t, newCounter(clock, 3, time.Minute), WithKeyFunc(headerKey), withClock(clock.Now))(&okHandler{})
	for i, want := range []string{"2", "1", "0", "0", "0"} {
		rec := get(h, "/", "c")
		if got := rec.Header().Get("X-RateLimit-Remaining"); got != want {
			t.Errorf("request %d: remaining %q, want %q", i+1, got, want)
		}
		wantRL := `"default";r=` + want + ";t=60"
		if got := rec.Header().Get("RateLimit"); got != wantRL {
			t.Errorf("request %d: RateLimit %q, want %q", i+1, got, wantRL)
		}
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	tests := []struct {
		name      string
		period    time.Duration
		elapsed   time.Duration // between the first request and the denial
		wantRetry string
	}{
		{"whole seconds", 10 * time.Second, 2 * time.Second, "8"},
		{"fraction rounds up", 10 * time.Second, 2500 * time.Millisecond, "8"},
		{"sub-second window", 300 * time.Millisecond, 0, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			h := mustNew(t, newCounter(clock, 2, tt.period), WithKeyFunc(headerKey), withClock(clock.Now))(&okHandler{})
			get(h, "/", "c")
			clock.Advance(tt.elapsed)
			get(h, "/", "c")
			rec := get(h, "/", "c")
			if rec.Code != http.StatusTooManyRequests {
				t.Fatalf("third request: %d, want 429", rec.Code)
			}
			ra := rec.Header().Get("Retry-After")
			if ra != tt.wantRetry {
				t.Errorf("Retry-After %q, want %q", ra, tt.wantRetry)
			}
			secs, err := strconv.Atoi(ra)
			if err != nil || secs < 1 {
				t.Fatalf("Retry-After %q is not a positive integer", ra)
			}
			// One second early is too early for whole-second waits...
			if secs > 1 {
				clock.Advance(time.Duration(secs-1) * time.Second)
				if rec := get(h, "/", "c"); rec.Code != http.StatusTooManyRequests {
					t.Errorf("a second before Retry-After: %d, want 429", rec.Code)
				}
				clock.Advance(time.Second)
			} else {
				clock.Advance(time.Second)
			}
			// ...and a client that waited as told gets in.
			if rec := get(h, "/", "c"); rec.Code != http.StatusOK {
				t.Errorf("after waiting Retry-After: %d, want 200", rec.Code)
			}
		})
	}
}

func TestCost(t *testing.T) {
	clock := newFakeClock()
	cost := func(r *http.Request) int {
		n, err := strconv.Atoi(r.Header.Get("X-Cost"))
		if err != nil {
			return 1
		}
		return n
	}
	next := &okHandler{}
	h := mustNew(t, newCounter(clock, 10, time.Minute), WithKeyFunc(headerKey), WithCost(cost))(next)
	steps := []struct {
		cost      string
		status    int
		remaining string
	}{
		{"4", http.StatusOK, "6"},
		{"4", http.StatusOK, "2"},
		{"4", http.StatusTooManyRequests, "2"}, // a denial consumes nothing
		{"2", http.StatusOK, "0"},
		{"", http.StatusTooManyRequests, "0"},
		{"11", http.StatusRequestEntityTooLarge, ""},
		{"0", http.StatusBadRequest, ""},
		{"-3", http.StatusBadRequest, ""},
	}
	for i, s := range steps {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Client", "c")
		if s.cost != "" {
			r.Header.Set("X-Cost", s.cost)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if s.status == http.StatusOK {
			if rec.Code != http.StatusOK {
				t.Errorf("step %d (cost %s): status %d, want 200", i, s.cost, rec.Code)
			}
		} else {
			checkProblem(t, rec, s.status)
		}
		if got := rec.Header().Get("X-RateLimit-Remaining"); got != s.remaining {
			t.Errorf("step %d (cost %s): remaining %q, want %q", i, s.cost, got, s.remaining)
		}
	}
	if next.count() != 3 {
		t.Errorf("handler ran %d times, want 3", next.count())
	}
}

func TestDeniedHandler(t *testing.T) {
	clock := newFakeClock()
	var seen algorithms.Result
	h := mustNew(t, newCounter(clock, 1, time.Minute), WithKeyFunc(headerKey),
		WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, res algorithms.Result) {
			seen = res
			if w.Header().Get("Retry-After") != "60" || w.Header().Get("X-RateLimit-Remaining") != "0" {
				t.Errorf("headers not set before the denied handler: %v", w.Header())
			}
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte("slow down"))
		}))(&okHandler{})
	get(h, "/", "c")
	rec := get(h, "/", "c")
	if rec.Code != http.StatusTooManyRequests || rec.Body.String() != "slow down" {
		t.Errorf("got %d %q", rec.Code, rec.Body)
	}
	if seen.Allowed || seen.Limit != 1 || seen.RetryAfter != time.Minute {
		t.Errorf("denied handler saw %+v", seen)
	}
}

func TestLogGate(t *testing.T) {
	clock := newFakeClock()
	logger, logs := newLogger()
	h := mustNew(t, stubLimiter{err: errors.New("down")}, WithKeyFunc(headerKey), WithLogger(logger),
		withClock(clock.Now))(&okHandler{})
	for range 50 {
		get(h, "/", "c")
	}
	if n := strings.Count(logs.String(), "rate limiter failed"); n != 1 {
		t.Errorf("%d records for 50 failures within a second, want 1", n)
	}
	clock.Advance(time.Second)
	get(h, "/", "c")
	if n := strings.Count(logs.String(), "rate limiter failed"); n != 2 {
		t.Errorf("%d records after a second, want 2", n)
	}
	if !strings.Contains(logs.String(), "suppressed=49") {
		t.Errorf("second record does not count the 49 suppressed: %q", logs)
	}
}

// A limiter func that returns a nil pointer in a Limiter gets New's
// limiter, as one that returns nil does.
func TestLimiterFuncTypedNil(t *testing.T) {
	var typedNil *counterLimiter
	main := newCounter(newFakeClock(), 1, time.Minute)
	h := mustNew(t, main, WithKeyFunc(headerKey),
		WithLimiterFunc(func(*http.Request, string) algorithms.Limiter { return typedNil }))(&okHandler{})
	if rec := get(h, "/", "c"); rec.Code != http.StatusOK {
		t.Fatalf("first: %d", rec.Code)
	}
	if rec := get(h, "/", "c"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("second: %d, want 429 from New's limiter", rec.Code)
	}
}
