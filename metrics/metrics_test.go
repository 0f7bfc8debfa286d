package metrics_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/observertest"
	"github.com/redlimit/redlimit/metrics"
)

// The scripted sequence shared with otelmetrics.TestCollect through the
// middleware and a Redis store, then a scrape of /metrics: every count
// exactly as the sequence implies.
func TestScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.New(reg); err == nil {
		t.Fatal("registering twice succeeded")
	}
	observertest.Replay(t, m, func() bool {
		got := scrape(t, reg)
		return strings.Contains(got, `redlimit_breaker_open{policy="api"} 1`) &&
			strings.Contains(got, `redlimit_store_errors_total{kind="connection"} 1`)
	})

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
		`redlimit_store_errors_total{kind="connection"} 1`,
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

// A nil Registerer, or a nil pointer in one, is an error, not a panic.
func TestNewRefusesNilRegisterer(t *testing.T) {
	for _, reg := range []prometheus.Registerer{nil, (*prometheus.Registry)(nil)} {
		if m, err := metrics.New(reg); m != nil || !errors.Is(err, algorithms.ErrInvalidOption) {
			t.Errorf("New(%#v): %v, %v; want ErrInvalidOption", reg, m, err)
		}
	}
}
