package middleware

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
)

// FuzzMiddleware sends whatever a client might: any address, forwarding
// header, API key and cost. The answer must be one of the documented
// statuses, and the API key must not come back.
func FuzzMiddleware(f *testing.F) {
	f.Add("192.0.2.1:1234", "", "", "1")
	f.Add("10.0.0.1:1", "198.51.100.1, 10.0.0.2", "k", "3")
	f.Add("[2001:db8::1%eth0]:80", "garbage,,", "key\x00with\xffbytes", "-1")
	f.Add("", "", strings.Repeat("x", 400), "99999999999999999999")

	store := must(memstore.New())
	lim, err := algorithms.New(store, algorithms.TokenBucket, algorithms.PerMinute(5))
	if err != nil {
		f.Fatal(err)
	}
	kf := keyfunc.FirstOf(keyfunc.APIKey("X-API-Key"),
		keyfunc.IP(keyfunc.TrustProxies(netip.MustParsePrefix("10.0.0.0/8"))))
	cost := func(r *http.Request) int {
		n, _ := strconv.Atoi(r.Header.Get("X-Cost"))
		return n
	}
	logger, _ := newLogger()
	h := mustNew(f, lim, WithKeyFunc(kf), WithCost(cost), WithLogger(logger))(trivial)
	allowed := map[int]bool{
		http.StatusNoContent: true, http.StatusTooManyRequests: true, http.StatusBadRequest: true,
		http.StatusUnauthorized: true, http.StatusRequestEntityTooLarge: true,
	}

	// Every header value the middleware writes has a fixed form, and every
	// body is precomputed, so nothing a client sends can come back.
	formats := map[string]*regexp.Regexp{
		hdrLimit:        regexp.MustCompile(`^\d+$`),
		hdrRemaining:    regexp.MustCompile(`^\d+$`),
		hdrReset:        regexp.MustCompile(`^\d+$`),
		hdrRetryAfter:   regexp.MustCompile(`^[1-9]\d*$`),
		hdrPolicy:       regexp.MustCompile(`^"default";q=\d+;w=[1-9]\d*$`),
		hdrRateLimit:    regexp.MustCompile(`^"default";r=\d+;t=\d+$`),
		hdrCacheControl: regexp.MustCompile(`^no-store$`),
		hdrContentType:  regexp.MustCompile(`^application/problem\+json$`),
		hdrAuthenticate: regexp.MustCompile(`^(Bearer|APIKey)$`),
	}
	c := h.(*handler).c
	bodies := map[string]bool{"": true}
	for _, p := range []problem{c.tooMany, c.badKey, c.unauthorized, c.badCost, c.costTooLarge} {
		bodies[string(p.body)] = true
	}

	f.Fuzz(func(t *testing.T, addr, xff, apiKey, costHeader string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = addr
		r.Header["X-Forwarded-For"] = []string{xff}
		r.Header["X-Api-Key"] = []string{apiKey}
		r.Header["X-Cost"] = []string{costHeader}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if !allowed[rec.Code] {
			t.Fatalf("status %d", rec.Code)
		}
		for name, vs := range rec.Header() {
			re := formats[name]
			if re == nil {
				t.Fatalf("unexpected header %s", name)
			}
			for _, v := range vs {
				if !re.MatchString(v) {
					t.Fatalf("%s: %q", name, v)
				}
			}
		}
		if !bodies[rec.Body.String()] {
			t.Fatalf("body %q", rec.Body)
		}
	})
}

// resultLimiter returns whatever Result (or error) it holds: a custom
// limiter that may break every promise of a Result.
type resultLimiter struct {
	res algorithms.Result
	err error
}

func (l resultLimiter) Allow(context.Context, string, int) (algorithms.Result, error) {
	return l.res, l.err
}

// FuzzLimiterResult puts any Result a custom limiter might return, under
// any of the middleware's header options, through the middleware: no
// panic, a documented status, and header values of their fixed forms.
func FuzzLimiterResult(f *testing.F) {
	f.Add(true, 10, 3, int64(1e9), int64(0), int64(6e10), 0, uint8(0), false, uint8(0), "p")
	f.Add(false, -5, -9, int64(-1), int64(-7), int64(0), -1, uint8(9), true, uint8(3), "a\"b\\c")
	f.Add(false, 1<<62, 1<<62, int64(1<<62), int64(1<<62), int64(1<<62), 1<<30, uint8(4), false, uint8(1), "")
	f.Fuzz(func(t *testing.T, allowed bool, limit, remaining int, reset, retry, period int64, index int, decider uint8, fail bool, flags uint8, name string) {
		res := algorithms.Result{Allowed: allowed, Limit: limit, Remaining: remaining, ResetAfter: time.Duration(reset),
			RetryAfter: time.Duration(retry), Period: time.Duration(period), Index: index, Decider: algorithms.Decider(decider)}
		var err error
		if fail {
			err = errors.New("the custom limiter failed")
		}
		opts := []Option{WithKeyFunc(headerKey), WithPolicyName(name),
			WithLegacyHeaders(flags&1 == 0), WithIETFHeaders(flags&2 == 0), WithResetMode(ResetMode(flags >> 2 & 1))}
		if flags&8 != 0 {
			opts = append(opts, WithErrorPolicy(PassOnError))
		}
		logger, _ := newLogger()
		mw, nerr := New(resultLimiter{res, err}, append(opts, WithLogger(logger))...)
		if nerr != nil {
			// Only a policy name New refuses.
			if _, perr := New(resultLimiter{}, WithPolicyName(name)); perr == nil || !errors.Is(nerr, algorithms.ErrInvalidOption) {
				t.Fatalf("New refused a valid configuration: %v", nerr)
			}
			return
		}
		rec := get(mw(trivial), "/", "client")
		switch rec.Code {
		case http.StatusNoContent, http.StatusTooManyRequests, http.StatusServiceUnavailable:
		default:
			t.Fatalf("status %d", rec.Code)
		}
		number := regexp.MustCompile(`^\d+$`)
		for name, vs := range rec.Header() {
			for _, v := range vs {
				if strings.ContainsAny(v, "\r\n") {
					t.Fatalf("%s: %q", name, v)
				}
				switch name {
				case hdrLimit, hdrRemaining, hdrReset, hdrRetryAfter:
					if !number.MatchString(v) {
						t.Fatalf("%s: %q is no whole number", name, v)
					}
				}
			}
		}
		if ra := rec.Header().Get(hdrRetryAfter); ra != "" {
			if n, err := strconv.ParseInt(ra, 10, 64); err != nil || n < 1 {
				t.Fatalf("Retry-After %q", ra)
			}
		}
	})
}
