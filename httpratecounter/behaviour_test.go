package httpratecounter

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/httprate"
)

// newCounterFunc builds a fresh Counter, in its own key space, on a new
// client of the backend under test (as one application instance would).
type newCounterFunc func(t *testing.T, prefix string) *Counter

// httprate's documented behaviours, with the counts in Redis: each case
// runs on a standalone server and on a Cluster, with and without
// WithStrictLimit, and must see what httprate promises with its own
// in-memory counter.
func TestHTTPRateBehaviours(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, newCounter newCounterFunc)
	}{
		{"limit per window, headers, 429", testLimitPerWindow},
		{"previous window weighs by its share still in the window", testSlidingWeight},
		{"whole again after two windows", testWholeAgain},
		{"keyed by IP", testKeyByIP},
		{"keyed by real IP headers", testKeyByRealIP},
		{"per route", testPerRoute},
		{"increment and request limit from the context", testContextIncrementAndLimit},
		{"instances share one count", testInstancesShare},
	}
	for _, b := range startBackends(t) {
		for _, strict := range []bool{false, true} {
			mode := "plain"
			if strict {
				mode = "strict"
			}
			t.Run(b.name+"/"+mode, func(t *testing.T) {
				for i, tc := range cases {
					newCounter := func(t *testing.T, prefix string) *Counter {
						opts := []Option{WithPrefix(fmt.Sprintf("%s-case%d-%s", mode, i, prefix))}
						if strict {
							opts = append(opts, WithStrictLimit())
						}
						return mustNew(t, b.newClient(t), opts...)
					}
					t.Run(tc.name, func(t *testing.T) { tc.run(t, newCounter) })
				}
			})
		}
	}
}

// limitBy is httprate.LimitBy with the counter and its handlers.
func limitBy(c *Counter, limit int, window time.Duration, key httprate.KeyFunc) func(http.Handler) http.Handler {
	return httprate.LimitBy(limit, window, key, c.Options()...)
}

func testLimitPerWindow(t *testing.T, newCounter newCounterFunc) {
	const window = time.Hour
	awayFromBoundary(window, 5*time.Second)
	c := newCounter(t, "")
	h := limitBy(c, 3, window, httprate.Key("everyone"))(ok)
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	reset := strconv.FormatInt(time.Now().Truncate(window).Add(window).Unix(), 10)
	want := []response{
		{code: 200, limit: "3", remaining: "2", reset: reset},
		{code: 200, limit: "3", remaining: "1", reset: reset},
		{code: 200, limit: "3", remaining: "0", reset: reset},
		{code: 429, limit: "3", remaining: "0", reset: reset, ra: "3600", body: tooMany},
		{code: 429, limit: "3", remaining: "0", reset: reset, ra: "3600", body: tooMany},
	}
	for i, w := range want {
		got := send(h, "GET", "/", "192.0.2.1:1000")
		if got != w {
			t.Errorf("request %d: %+v; want %+v", i+1, got, w)
		}
	}
}

// tooMany is the body of a 429 from LimitHandler(nil), written once.
const tooMany = `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429,"detail":"The rate limit for this client is exhausted; retry after the number of seconds in Retry-After."}`

func testSlidingWeight(t *testing.T, newCounter newCounterFunc) {
	const window, limit = time.Hour, 10
	awayFromBoundary(window, 5*time.Second)
	c := newCounter(t, "")
	h := limitBy(c, limit, window, httprate.Key("k"))(ok)
	cur := time.Now().Truncate(window)
	// httprate weighs the previous count by (window - elapsed) / window and
	// rounds; pick a previous count whose weighted value is far from a
	// rounding edge, so the answer is not decided by milliseconds.
	f := float64(time.Since(cur)) / float64(window)
	prev := 0
	for p := limit; p <= 2*limit; p++ {
		if w := float64(p) * (1 - f); math.Abs(w-math.Floor(w)-0.5) > 0.05 {
			prev = p
			break
		}
	}
	// Written directly: a strict Counter would refuse a count over the limit.
	// LimitBy joins key functions' results with a ':' after each.
	if err := c.client.IncrBy(context.Background(), c.keyOf(hashOf("k:"), cur.Add(-window)), int64(prev)).Err(); err != nil {
		t.Fatal(err)
	}
	weighed := int(math.Round(float64(prev) * (1 - f)))
	wantAdmitted := max(0, limit-weighed)
	admitted := 0
	for range limit + 2 {
		if send(h, "GET", "/", "192.0.2.1:1").code == 200 {
			admitted++
		}
	}
	if admitted != wantAdmitted {
		t.Fatalf("previous window %d at %.3f of the window gone: admitted %d, want %d", prev, f, admitted, wantAdmitted)
	}
}

func testWholeAgain(t *testing.T, newCounter newCounterFunc) {
	const window = 400 * time.Millisecond
	awayFromBoundary(window, 300*time.Millisecond)
	c := newCounter(t, "")
	h := limitBy(c, 2, window, httprate.Key("k"))(ok)
	codes := func() string {
		var s []string
		for range 3 {
			s = append(s, strconv.Itoa(send(h, "GET", "/", "192.0.2.1:1").code))
		}
		return strings.Join(s, " ")
	}
	if got := codes(); got != "200 200 429" {
		t.Fatalf("first window: %s; want 200 200 429", got)
	}
	// Two window starts later the spent window no longer weighs.
	next := time.Now().Truncate(window).Add(2 * window)
	time.Sleep(time.Until(next) + 10*time.Millisecond)
	if got := codes(); got != "200 200 429" {
		t.Fatalf("two windows later: %s; want 200 200 429", got)
	}
}

func testKeyByIP(t *testing.T, newCounter newCounterFunc) {
	const window = time.Hour
	awayFromBoundary(window, 5*time.Second)
	c := newCounter(t, "")
	//lint:ignore SA1019 the deprecated key function is one of httprate's documented behaviours
	h := limitBy(c, 1, window, httprate.KeyByIP)(ok)
	steps := []struct {
		remote string
		want   int
	}{
		{"192.0.2.1:1000", 200},
		{"192.0.2.1:2000", 429}, // another port: the same client
		{"192.0.2.2:1000", 200},
		{"[2001:db8:1:2::1]:1000", 200},
		{"[2001:db8:1:2:ffff::9]:1000", 429}, // the same /64
		{"[2001:db8:1:3::1]:1000", 200},      // another /64
	}
	for _, s := range steps {
		if got := send(h, "GET", "/", s.remote).code; got != s.want {
			t.Errorf("from %s: %d; want %d", s.remote, got, s.want)
		}
	}
}

func testKeyByRealIP(t *testing.T, newCounter newCounterFunc) {
	const window = time.Hour
	awayFromBoundary(window, 5*time.Second)
	c := newCounter(t, "")
	//lint:ignore SA1019 the deprecated key function is one of httprate's documented behaviours
	h := limitBy(c, 1, window, httprate.KeyByRealIP)(ok)
	steps := []struct {
		remote string
		header []string
		want   int
	}{
		{"10.0.0.1:1", []string{"X-Forwarded-For", "198.51.100.7, 10.0.0.1"}, 200},
		{"10.0.0.2:1", []string{"X-Real-IP", "198.51.100.7"}, 429}, // the same client behind another proxy
		{"10.0.0.1:1", []string{"X-Forwarded-For", "198.51.100.8"}, 200},
		{"10.0.0.1:1", []string{"True-Client-IP", "198.51.100.8"}, 429},
		{"198.51.100.9:1", nil, 200}, // no header: the peer
		{"198.51.100.9:2", nil, 429},
	}
	for i, s := range steps {
		if got := send(h, "GET", "/", s.remote, s.header...).code; got != s.want {
			t.Errorf("step %d from %s %v: %d; want %d", i+1, s.remote, s.header, got, s.want)
		}
	}
}

func testPerRoute(t *testing.T, newCounter newCounterFunc) {
	const window = time.Hour
	awayFromBoundary(window, 5*time.Second)
	search, upload := newCounter(t, "search"), newCounter(t, "upload")
	//lint:ignore SA1019 keyed by the peer address, as a directly exposed server may be
	byIP := httprate.KeyByIP
	r := chi.NewRouter()
	r.With(limitBy(search, 2, window, byIP)).Get("/search", ok)
	r.With(limitBy(upload, 1, window, byIP)).Post("/upload", ok)
	steps := []struct {
		method, path string
		want         int
		limit        string
	}{
		{"GET", "/search", 200, "2"},
		{"POST", "/upload", 200, "1"},
		{"POST", "/upload", 429, "1"},
		{"GET", "/search", 200, "2"}, // the upload limit did not touch the search count
		{"GET", "/search", 429, "2"},
	}
	for i, s := range steps {
		got := send(r, s.method, s.path, "192.0.2.1:1")
		if got.code != s.want || got.limit != s.limit {
			t.Errorf("step %d %s %s: %d with limit %q; want %d with %q", i+1, s.method, s.path, got.code, got.limit, s.want, s.limit)
		}
	}
	if got := send(r, "GET", "/search", "192.0.2.2:1").code; got != 200 {
		t.Errorf("another client's search: %d; want 200", got)
	}
}

func testContextIncrementAndLimit(t *testing.T, newCounter newCounterFunc) {
	const window = time.Hour
	awayFromBoundary(window, 5*time.Second)
	c := newCounter(t, "")
	h := limitBy(c, 5, window, httprate.Key("k"))(ok)
	ctx := context.Background()
	steps := []struct {
		ctx                         context.Context
		want                        int
		limit, remaining, increment string
	}{
		{httprate.WithIncrement(ctx, 3), 200, "5", "2", "3"},
		{httprate.WithIncrement(ctx, 3), 429, "5", "2", "3"}, // 3 more do not fit in 2
		{httprate.WithRequestLimit(ctx, 3), 429, "3", "0", ""},
		{ctx, 200, "5", "1", ""},
		{ctx, 200, "5", "0", ""},
		{ctx, 429, "5", "0", ""},
	}
	for i, s := range steps {
		got := sendCtx(s.ctx, h, "GET", "/", "192.0.2.1:1")
		if got.code != s.want || got.limit != s.limit || got.remaining != s.remaining || got.increment != s.increment {
			t.Errorf("step %d: %d, limit %q, remaining %q, increment %q; want %d, %q, %q, %q",
				i+1, got.code, got.limit, got.remaining, got.increment, s.want, s.limit, s.remaining, s.increment)
		}
	}
}

// Two application instances, each with its own client, Counter and httprate
// limiter, share one count.
func testInstancesShare(t *testing.T, newCounter newCounterFunc) {
	const window = time.Hour
	awayFromBoundary(window, 5*time.Second)
	a, b := newCounter(t, "shared"), newCounter(t, "shared")
	ha := limitBy(a, 3, window, httprate.Key("k"))(ok)
	hb := limitBy(b, 3, window, httprate.Key("k"))(ok)
	var got []string
	for _, h := range []http.Handler{ha, hb, ha, hb, ha} {
		got = append(got, strconv.Itoa(send(h, "GET", "/", "192.0.2.1:1").code))
	}
	if s := strings.Join(got, " "); s != "200 200 200 429 429" {
		t.Fatalf("alternating instances: %s; want 200 200 200 429 429", s)
	}
}
