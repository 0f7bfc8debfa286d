package otelmetrics_test

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/observertest"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/otelmetrics"
	"github.com/redlimit/redlimit/redisstore"
)

// The scripted sequence shared with the Prometheus twin (metrics.TestScrape)
// through the middleware and a Redis store, then one collection: every
// instrument and every series exactly as the sequence implies, and nothing
// else.
func TestCollect(t *testing.T) {
	m, reader := newMetrics(t)
	const breaker = "redlimit.breaker.open{redlimit.policy=api}"
	const refused = "redlimit.store.errors{error.type=connection}"
	observertest.Replay(t, m, func() bool {
		got := collect(t, reader).values
		return got[breaker] == 1 && got[refused] == 1
	})

	got := collect(t, reader)
	wantValues := map[string]float64{
		"redlimit.requests{redlimit.policy=search,redlimit.result=allowed}":       2,
		"redlimit.requests{redlimit.policy=search,redlimit.result=denied}":        1,
		"redlimit.requests{redlimit.policy=search,redlimit.result=key_error}":     1,
		"redlimit.requests{redlimit.policy=shadow,redlimit.result=allowed}":       1,
		"redlimit.requests{redlimit.policy=shadow,redlimit.result=shadow_denied}": 2,
		"redlimit.requests{redlimit.policy=api,redlimit.result=allowed}":          1,
		"redlimit.requests{redlimit.policy=api,redlimit.result=local_allowed}":    6,
		"redlimit.store.errors{error.type=script}":                                1,
		refused: 1,
		breaker: 1,
		"redlimit.decision.duration{redlimit.store=memory}": 6,
		"redlimit.decision.duration{redlimit.store=redis}":  7,
	}
	wantShapes := map[string]string{
		"redlimit.requests":          "sum monotonic=true CumulativeTemporality {request}",
		"redlimit.store.errors":      "sum monotonic=true CumulativeTemporality {error}",
		"redlimit.breaker.open":      "gauge {breaker}",
		"redlimit.decision.duration": "histogram CumulativeTemporality s",
	}
	for _, diff := range diffMaps(got.values, wantValues) {
		t.Error(diff)
	}
	for _, diff := range diffMaps(got.shapes, wantShapes) {
		t.Error(diff)
	}
	for k, p := range got.histograms {
		var n uint64
		for _, c := range p.BucketCounts {
			n += c
		}
		switch {
		case !slices.Equal(p.Bounds, otelmetrics.DurationBounds):
			t.Errorf("%s: bounds %v, want DurationBounds", k, p.Bounds)
		case n != p.Count || p.Sum <= 0:
			t.Errorf("%s: buckets add up to %d, count %d, sum %g", k, n, p.Count, p.Sum)
		case p.BucketCounts[len(p.BucketCounts)-1] != 0:
			t.Errorf("%s: %d decisions over 1s", k, p.BucketCounts[len(p.BucketCounts)-1])
		}
	}
}

// diffMaps describes how got differs from want, in key order.
func diffMaps[V comparable](got, want map[string]V) []string {
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok || g != want[k] {
			diffs = append(diffs, "got "+k+" = "+fmtValue(g, ok)+", want "+fmtValue(want[k], true))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, "unexpected "+k+" = "+fmtValue(got[k], true))
		}
	}
	return diffs
}

// Requests exempted by WithSkip are counted as skipped, and add no
// decision duration, since no limiter was asked.
func TestSkipped(t *testing.T) {
	m, reader := newMetrics(t)
	observertest.ReplaySkipped(t, m)
	want := map[string]float64{
		"redlimit.requests{redlimit.policy=api,redlimit.result=allowed}": 1,
		"redlimit.requests{redlimit.policy=api,redlimit.result=skipped}": 4,
		"redlimit.decision.duration{redlimit.store=memory}":              1,
	}
	for _, diff := range diffMaps(collect(t, reader).values, want) {
		t.Error(diff)
	}
}

// A breaker that closes again reads 0, and repeated reports of the same
// state do not add up: the gauge holds the last state per policy.
func TestBreakerGauge(t *testing.T) {
	for _, tt := range []struct {
		name    string
		changes []bool
		want    float64
	}{
		{"opened", []bool{true}, 1},
		{"opened twice", []bool{true, true}, 1},
		{"opened then closed", []bool{true, false}, 0},
		{"closed then opened", []bool{true, false, true}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, reader := newMetrics(t)
			for _, open := range tt.changes {
				m.BreakerChanged("api", open)
			}
			m.BreakerChanged("other", false)
			want := map[string]float64{
				"redlimit.breaker.open{redlimit.policy=api}":   tt.want,
				"redlimit.breaker.open{redlimit.policy=other}": 0,
			}
			for _, diff := range diffMaps(collect(t, reader).values, want) {
				t.Error(diff)
			}
		})
	}
}

// Observers are called from every request's goroutine at once: no count is
// lost while the options of new attribute values are being made.
func TestConcurrent(t *testing.T) {
	m, reader := newMetrics(t)
	const goroutines, each = 8, 200
	policies := []string{"a", "b", "c"}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				m.Decision(middleware.Decision{Policy: policies[(g+i)%3], Outcome: middleware.OutcomeAllowed,
					Store: "memory", Duration: time.Microsecond})
				m.StoreError(redisstore.ErrorTimeout)
			}
		})
	}
	wg.Wait()
	got := collect(t, reader).values
	var requests float64
	for _, p := range policies {
		requests += got["redlimit.requests{redlimit.policy="+p+",redlimit.result=allowed}"]
	}
	if want := float64(goroutines * each); requests != want ||
		got["redlimit.decision.duration{redlimit.store=memory}"] != want ||
		got["redlimit.store.errors{error.type=timeout}"] != want {
		t.Fatalf("got %v, want %g of each", got, want)
	}
}

// A nil MeterProvider, or a nil pointer in one, is an error, not a panic.
func TestNewRefusesNilProvider(t *testing.T) {
	for _, mp := range []metric.MeterProvider{nil, (*sdkmetric.MeterProvider)(nil)} {
		if m, err := otelmetrics.New(mp); m != nil || !errors.Is(err, algorithms.ErrInvalidOption) {
			t.Errorf("New(%#v): %v, %v; want ErrInvalidOption", mp, m, err)
		}
	}
}

var errRefused = errors.New("refused")

// refusingMeter makes every instrument but refuses the one named refuse.
type refusingMeter struct {
	noop.Meter
	refuse string
}

func (r refusingMeter) Int64Counter(name string, o ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	c, _ := r.Meter.Int64Counter(name, o...)
	return c, r.err(name)
}

func (r refusingMeter) Float64Histogram(name string, o ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	h, _ := r.Meter.Float64Histogram(name, o...)
	return h, r.err(name)
}

func (r refusingMeter) Int64Gauge(name string, o ...metric.Int64GaugeOption) (metric.Int64Gauge, error) {
	g, _ := r.Meter.Int64Gauge(name, o...)
	return g, r.err(name)
}

func (r refusingMeter) err(name string) error {
	if name == r.refuse {
		return errRefused
	}
	return nil
}

type refusingProvider struct {
	noop.MeterProvider
	refuse string
}

func (p refusingProvider) Meter(string, ...metric.MeterOption) metric.Meter {
	return refusingMeter{refuse: p.refuse}
}

// An instrument the Meter cannot make fails New, with the Meter's error
// wrapped; a no-op provider is accepted.
func TestNewWrapsMeterErrors(t *testing.T) {
	for _, name := range []string{"redlimit.requests", "redlimit.decision.duration", "redlimit.store.errors", "redlimit.breaker.open"} {
		if m, err := otelmetrics.New(refusingProvider{refuse: name}); m != nil || !errors.Is(err, errRefused) {
			t.Errorf("refusing %s: New = %v, %v; want errRefused", name, m, err)
		}
	}
	if _, err := otelmetrics.New(noop.NewMeterProvider()); err != nil {
		t.Errorf("noop provider: %v", err)
	}
}
