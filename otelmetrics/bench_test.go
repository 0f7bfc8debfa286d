package otelmetrics_test

import (
	"testing"
	"time"

	"github.com/redlimit/redlimit/middleware"
)

// The cost of one request's report on an SDK MeterProvider: a counter and
// a histogram measurement, with attribute options made once per value set.
func BenchmarkDecision(b *testing.B) {
	m, _ := newMetrics(b)
	d := middleware.Decision{Policy: "api", Outcome: middleware.OutcomeAllowed, Store: "redis", Duration: 300 * time.Microsecond}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Decision(d)
		}
	})
}
