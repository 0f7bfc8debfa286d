package metrics_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/metrics"
	"github.com/redlimit/redlimit/middleware"
)

// Requests exempted by WithSkip are counted as skipped, and add no
// decision duration, since no limiter was asked.
func TestSkipped(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	h := mustMiddleware(t, mustNew(t, memstore.New(), algorithms.FixedWindow, algorithms.PerMinute(5)),
		middleware.WithObserver(m), middleware.WithPolicyName("api"),
		middleware.WithSkip(func(r *http.Request) bool { return r.RemoteAddr == "192.0.2.9:1" }))(ok)
	for range 4 {
		send(h, "192.0.2.9:1")
	}
	send(h, "192.0.2.1:1")
	want := `
# HELP redlimit_requests_total Requests seen by the rate-limiting middleware, by policy and outcome.
# TYPE redlimit_requests_total counter
redlimit_requests_total{policy="api",result="allowed"} 1
redlimit_requests_total{policy="api",result="skipped"} 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "redlimit_requests_total"); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var observed uint64
	for _, f := range families {
		if f.GetName() == "redlimit_decision_duration_seconds" {
			for _, s := range f.GetMetric() {
				observed += s.GetHistogram().GetSampleCount()
			}
		}
	}
	if observed != 1 {
		t.Fatalf("%d decision durations observed, want 1 (the allowed request's)", observed)
	}
}
