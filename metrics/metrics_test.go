package metrics_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/metrics"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/redisstore"
)

func send(h http.Handler, addr string, header ...string) int {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = addr
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec.Code
}

func mustNew(t *testing.T, store algorithms.Store, alg algorithms.Algorithm, l algorithms.Limit) algorithms.Limiter {
	t.Helper()
	lim, err := algorithms.New(store, alg, l)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// mustMiddleware is middleware.New for tests, failing t on an error.
func mustMiddleware(t *testing.T, lim algorithms.Limiter, opts ...middleware.Option) func(http.Handler) http.Handler {
	t.Helper()
	mw, err := middleware.New(lim, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

// A scripted sequence through the middleware and a Redis store, then a
// scrape of /metrics: every count exactly as the sequence implies.
func TestScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.New(reg); err == nil {
		t.Fatal("registering twice succeeded")
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	clock := algorithms.NewManualClock(time.Unix(1_800_000_000, 0))
	mem := memstore.New(memstore.WithClock(clock.Now))

	// search: 2 allowed, 1 denied, 1 key error (an unknown API key).
	search := mustMiddleware(t, mustNew(t, mem, algorithms.FixedWindow, algorithms.PerMinute(2)),
		middleware.WithObserver(m), middleware.WithPolicyName("search"), middleware.WithClock(clock.Now),
		middleware.WithCountCredentialFailures(false),
		middleware.WithKeyFunc(keyfunc.APIKey("X-API-Key", keyfunc.KnownAPIKey(func(raw string) bool { return raw == "k" }))))(ok)
	for range 3 {
		send(search, "192.0.2.1:1", "X-API-Key", "k")
	}
	send(search, "192.0.2.1:1", "X-API-Key", "guess")

	// shadow: 1 allowed, 2 shadow_denied.
	shadow := mustMiddleware(t, mustNew(t, mem, algorithms.TokenBucket, algorithms.PerMinute(1)),
		middleware.WithObserver(m), middleware.WithPolicyName("shadow"), middleware.WithShadow(true),
		middleware.WithClock(clock.Now), middleware.WithLogger(quiet))(ok)
	for range 3 {
		send(shadow, "192.0.2.2:1")
	}

	// Redis: 1 allowed; under OOM a new key is decided locally (1 store
	// error of kind script); with Redis gone, five refused connections open
	// the breaker, and those keys are decided locally.
	srv := redistest.StartServer(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer client.Close()
	store := redisstore.New(client, redisstore.WithObserver(m), redisstore.WithLogger(quiet), redisstore.WithPrefix("api"))
	api := mustMiddleware(t, mustNew(t, store, algorithms.FixedWindow, algorithms.PerMinute(5)),
		middleware.WithObserver(m), middleware.WithPolicyName("api"))(ok)
	send(api, "192.0.2.3:1")
	if err := client.ConfigSet(context.Background(), "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	send(api, "192.0.2.4:1")
	srv.Stop()
	for i := range 5 {
		send(api, "192.0.2."+string(rune('5'+i))+":1")
	}
	waitFor(t, func() bool { return strings.Contains(scrape(t, reg), `redlimit_breaker_open{policy="api"} 1`) })

	got := scrape(t, reg)
	for _, want := range []string{
		`redlimit_requests_total{policy="search",result="allowed"} 2`,
		`redlimit_requests_total{policy="search",result="denied"} 1`,
		`redlimit_requests_total{policy="search",result="key_error"} 1`,
		`redlimit_requests_total{policy="shadow",result="allowed"} 1`,
		`redlimit_requests_total{policy="shadow",result="shadow_denied"} 2`,
		`redlimit_requests_total{policy="api",result="allowed"} 1`,
		`redlimit_requests_total{policy="api",result="local_allowed"} 6`,
		`redlimit_store_errors_total{kind="script"} 1`,
		`redlimit_store_errors_total{kind="connection"} 5`,
		`redlimit_breaker_open{policy="api"} 1`,
		`redlimit_decision_duration_seconds_count{store="memory"} 6`,
		`redlimit_decision_duration_seconds_count{store="redis"} 7`,
		`redlimit_decision_duration_seconds_bucket{store="redis",le="1"} 7`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", got)
	}
}

// scrape fetches /metrics as Prometheus would.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("timed out waiting")
}

// A nil Registerer, or a nil pointer in one, is an error, not a panic.
func TestNewRefusesNilRegisterer(t *testing.T) {
	for _, reg := range []prometheus.Registerer{nil, (*prometheus.Registry)(nil)} {
		if m, err := metrics.New(reg); m != nil || !errors.Is(err, algorithms.ErrInvalidOption) {
			t.Errorf("New(%#v): %v, %v; want ErrInvalidOption", reg, m, err)
		}
	}
}
