package otelmetrics_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/otelmetrics"
)

// Metrics observe a middleware (and, with redisstore.WithObserver, a Redis
// store). An application would pass its own MeterProvider, or
// otel.GetMeterProvider(), with a periodic reader and an exporter; here a
// manual reader shows what was recorded.
func ExampleNew() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	m, err := otelmetrics.New(provider)
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

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, metric := range sm.Metrics {
			switch data := metric.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					result, _ := p.Attributes.Value(otelmetrics.ResultKey)
					fmt.Printf("%s %s %s: %d\n", metric.Name, result.AsString(), metric.Unit, p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range data.DataPoints {
					fmt.Printf("%s %s: %d decisions\n", metric.Name, metric.Unit, p.Count)
				}
			}
		}
	}
	// Unordered output:
	// redlimit.requests allowed {request}: 2
	// redlimit.requests denied {request}: 1
	// redlimit.decision.duration s: 3 decisions
}
