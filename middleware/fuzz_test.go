package middleware

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// FuzzMiddleware sends whatever a client might: any address, forwarding
// header, API key and cost. The answer must be one of the documented
// statuses, and the API key must not come back.
func FuzzMiddleware(f *testing.F) {
	f.Add("192.0.2.1:1234", "", "", "1")
	f.Add("10.0.0.1:1", "198.51.100.1, 10.0.0.2", "k", "3")
	f.Add("[2001:db8::1%eth0]:80", "garbage,,", "key\x00with\xffbytes", "-1")
	f.Add("", "", strings.Repeat("x", 400), "99999999999999999999")

	store := algorithms.NewMemoryStore()
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
	h := New(lim, WithKeyFunc(kf), WithCost(cost), WithLogger(logger))(trivial)
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
