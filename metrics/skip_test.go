package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/redlimit/redlimit/internal/observertest"
	"github.com/redlimit/redlimit/metrics"
)

// Requests exempted by WithSkip are counted as skipped, and add no
// decision duration, since no limiter was asked.
func TestSkipped(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	observertest.ReplaySkipped(t, m)
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
