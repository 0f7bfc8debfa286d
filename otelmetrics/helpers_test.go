package otelmetrics_test

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redlimit/redlimit/otelmetrics"
)

// newMetrics returns Metrics on an SDK MeterProvider read by hand.
func newMetrics(t testing.TB) (*otelmetrics.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	m, err := otelmetrics.New(provider)
	if err != nil {
		t.Fatal(err)
	}
	return m, reader
}

// collected is one collection flattened for exact comparison.
type collected struct {
	// values maps "instrument{k=v,...}" to a sum's or gauge's value, or to
	// a histogram's count.
	values map[string]float64
	// shapes maps an instrument's name to its aggregation and unit.
	shapes map[string]string
	// histograms are the histograms' points, by the same keys as values.
	histograms map[string]metricdata.HistogramDataPoint[float64]
}

// collect reads everything recorded under the package's scope.
func collect(t *testing.T, reader *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	c := collected{values: map[string]float64{}, shapes: map[string]string{},
		histograms: map[string]metricdata.HistogramDataPoint[float64]{}}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelmetrics.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, otelmetrics.ScopeName)
		}
		for _, m := range sm.Metrics {
			c.add(t, m)
		}
	}
	return c
}

func (c collected) add(t *testing.T, m metricdata.Metrics) {
	key := func(s attribute.Set) string {
		return m.Name + "{" + s.Encoded(attribute.DefaultEncoder()) + "}"
	}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		c.shapes[m.Name] = fmt.Sprintf("sum monotonic=%t %s %s", d.IsMonotonic, d.Temporality, m.Unit)
		for _, p := range d.DataPoints {
			c.values[key(p.Attributes)] = float64(p.Value)
		}
	case metricdata.Gauge[int64]:
		c.shapes[m.Name] = "gauge " + m.Unit
		for _, p := range d.DataPoints {
			c.values[key(p.Attributes)] = float64(p.Value)
		}
	case metricdata.Histogram[float64]:
		c.shapes[m.Name] = fmt.Sprintf("histogram %s %s", d.Temporality, m.Unit)
		for _, p := range d.DataPoints {
			c.values[key(p.Attributes)] = float64(p.Count)
			c.histograms[key(p.Attributes)] = p
		}
	default:
		t.Errorf("%s: unexpected aggregation %T", m.Name, m.Data)
	}
}

// fmtValue prints v, or that it is absent.
func fmtValue[V any](v V, ok bool) string {
	if !ok {
		return "(absent)"
	}
	return fmt.Sprint(v)
}
