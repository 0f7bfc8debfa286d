package metrics_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/metrics"
	"github.com/redlimit/redlimit/middleware"
)

// Metrics observe a middleware (and, with redisstore.WithObserver, a Redis
// store). An application would register them on
// prometheus.DefaultRegisterer and serve promhttp.Handler(); here a
// registry of its own is read directly.
func ExampleNew() {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		panic(err)
	}

	store, err := memstore.New()
	if err != nil {
		panic(err)
	}
	limiter, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(2))
	if err != nil {
		panic(err)
	}
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mw, err := middleware.New(limiter, middleware.WithObserver(m), middleware.WithPolicyName("search"))
	if err != nil {
		panic(err)
	}
	h := mw(ok)
	for range 3 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/search", nil))
	}

	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			switch {
			case s.GetCounter() != nil:
				labels := ""
				for _, l := range s.GetLabel() {
					labels += " " + l.GetName() + "=" + l.GetValue()
				}
				fmt.Printf("%s%s: %g\n", f.GetName(), labels, s.GetCounter().GetValue())
			case s.GetHistogram() != nil:
				fmt.Printf("%s: %d decisions\n", f.GetName(), s.GetHistogram().GetSampleCount())
			}
		}
	}
	// Output:
	// redlimit_decision_duration_seconds: 3 decisions
	// redlimit_requests_total policy=search result=allowed: 2
	// redlimit_requests_total policy=search result=denied: 1
}
