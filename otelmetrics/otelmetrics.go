// Package otelmetrics exports what redlimit's middleware and Redis store do
// as OpenTelemetry metrics, for services that export with OpenTelemetry
// rather than the Prometheus client (package metrics is the Prometheus
// twin; both report the same events). One *Metrics serves as both a
// middleware.Observer and an redisstore.Observer:
//
//	m, err := otelmetrics.New(otel.GetMeterProvider())
//	store, err := redisstore.New(client, redisstore.WithObserver(m))
//	mw, err := middleware.New(limiter, middleware.WithObserver(m), middleware.WithPolicyName("search"))
//
// The package uses only the OpenTelemetry metric API; the application
// chooses the SDK, its readers and exporters. The instruments, named in the
// style of OpenTelemetry's semantic conventions (units in UCUM), and their
// Prometheus twins:
//
//	instrument                   kind              unit       attributes                         Prometheus twin
//	redlimit.requests            Int64Counter      {request}  redlimit.policy, redlimit.result   redlimit_requests_total{policy, result}
//	redlimit.decision.duration   Float64Histogram  s          redlimit.store                     redlimit_decision_duration_seconds{store}
//	redlimit.store.errors        Int64Counter      {error}    error.type                         redlimit_store_errors_total{kind}
//	redlimit.breaker.open        Int64Gauge        {breaker}  redlimit.policy                    redlimit_breaker_open{policy}
//
// redlimit.result is one of the middleware's Outcome constants: allowed,
// denied, shadow_denied, fail_open, fail_closed, local_allowed,
// local_denied, cache_denied, key_error, invalid, skipped (exempted by
// WithSkip, with no duration recorded). redlimit.store is memory, redis or
// custom. error.type is timeout, connection, script or other. The breaker
// gauge is 1 while the breaker is open and 0 once it closes; its
// redlimit.policy is the middleware's policy name for its own breaker, and
// the store's prefix for a Redis store's.
//
// Every attribute value comes from configuration (policy names, store
// prefixes) or from a fixed set, never from a request, so a client cannot
// grow the number of series.
//
// It is a module of its own, github.com/redlimit/redlimit/otelmetrics, so that
// only the programs that use it compile OpenTelemetry.
package otelmetrics

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/redisstore"
)

// ScopeName is the instrumentation scope of the Meter the instruments are
// made on: this package's import path.
const ScopeName = "github.com/redlimit/redlimit/otelmetrics"

// The attribute keys of the instruments, for views and queries.
const (
	// PolicyKey: the middleware's policy name (middleware.WithPolicyName),
	// or a Redis store's prefix on the breaker gauge.
	PolicyKey = attribute.Key("redlimit.policy")
	// ResultKey: the request's outcome, one of middleware's Outcome
	// constants.
	ResultKey = attribute.Key("redlimit.result")
	// StoreKey: the store that decided: memory, redis or custom.
	StoreKey = attribute.Key("redlimit.store")
	// ErrorTypeKey: the kind of a failed script call (redisstore.ErrorKind),
	// under the semantic conventions' general error attribute.
	ErrorTypeKey = attribute.Key("error.type")
)

// DurationBounds are the advised bucket boundaries of
// redlimit.decision.duration, in seconds: the same as the Prometheus
// twin's, 10 µs to 1 s, since the SDK's default boundaries (0 to 10000)
// suit milliseconds and would put every decision in the first bucket. A
// view in the SDK may override them.
var DurationBounds = []float64{
	10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
	0.1, 0.25, 0.5, 1,
}

// Metrics holds redlimit's instruments. It implements middleware.Observer
// and redisstore.Observer; its methods are safe for concurrent use.
type Metrics struct {
	requests    metric.Int64Counter
	duration    metric.Float64Histogram
	storeErrors metric.Int64Counter
	breakerOpen metric.Int64Gauge

	// Measurement options by attribute values, made once: building an
	// attribute set on each call would cost allocations on every request.
	// The values are few and fixed by configuration (see the package doc).
	adds    sync.Map // attrKey -> []metric.AddOption
	records sync.Map // attrKey -> []metric.RecordOption
}

var (
	_ middleware.Observer = (*Metrics)(nil)
	_ redisstore.Observer = (*Metrics)(nil)
)

// New creates the instruments on a Meter of mp named ScopeName. It fails
// with an error wrapping algorithms.ErrInvalidOption for a nil mp (or a nil
// pointer in one), and wrapping the Meter's error when an instrument cannot
// be made.
func New(mp metric.MeterProvider) (*Metrics, error) {
	if mp == nil {
		return nil, fmt.Errorf("otelmetrics: %w: nil MeterProvider", algorithms.ErrInvalidOption)
	}
	if v := reflect.ValueOf(mp); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, fmt.Errorf("otelmetrics: %w: nil %T", algorithms.ErrInvalidOption, mp)
	}
	meter := mp.Meter(ScopeName)
	m := &Metrics{}
	var err error
	if m.requests, err = meter.Int64Counter("redlimit.requests",
		metric.WithDescription("Requests seen by the rate-limiting middleware, by policy and outcome."),
		metric.WithUnit("{request}")); err != nil {
		return nil, fmt.Errorf("otelmetrics: redlimit.requests: %w", err)
	}
	if m.duration, err = meter.Float64Histogram("redlimit.decision.duration",
		metric.WithDescription("Time the limiter took to decide a request, by store."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(DurationBounds...)); err != nil {
		return nil, fmt.Errorf("otelmetrics: redlimit.decision.duration: %w", err)
	}
	if m.storeErrors, err = meter.Int64Counter("redlimit.store.errors",
		metric.WithDescription("Failed Redis script calls, by kind: timeout, connection, script, other."),
		metric.WithUnit("{error}")); err != nil {
		return nil, fmt.Errorf("otelmetrics: redlimit.store.errors: %w", err)
	}
	if m.breakerOpen, err = meter.Int64Gauge("redlimit.breaker.open",
		metric.WithDescription("1 while the breaker of a middleware policy or a Redis store (by prefix) is open."),
		metric.WithUnit("{breaker}")); err != nil {
		return nil, fmt.Errorf("otelmetrics: redlimit.breaker.open: %w", err)
	}
	return m, nil
}

// Decision implements middleware.Observer.
func (m *Metrics) Decision(d middleware.Decision) {
	ctx := context.Background()
	m.requests.Add(ctx, 1, m.addOptions(attrKey{requestsAttrs, d.Policy, d.Outcome})...)
	if d.Store != "" {
		m.duration.Record(ctx, d.Duration.Seconds(), m.recordOptions(attrKey{durationAttrs, d.Store, ""})...)
	}
}

// BreakerChanged implements middleware.Observer and redisstore.Observer.
func (m *Metrics) BreakerChanged(policy string, open bool) {
	var v int64
	if open {
		v = 1
	}
	m.breakerOpen.Record(context.Background(), v, m.recordOptions(attrKey{breakerAttrs, policy, ""})...)
}

// StoreError implements redisstore.Observer.
func (m *Metrics) StoreError(kind redisstore.ErrorKind) {
	m.storeErrors.Add(context.Background(), 1, m.addOptions(attrKey{storeErrorAttrs, string(kind), ""})...)
}

// attrKind tells which instrument's attributes an attrKey's values are.
type attrKind uint8

const (
	requestsAttrs attrKind = iota
	durationAttrs
	storeErrorAttrs
	breakerAttrs
)

// attrKey is the attribute values of one measurement: a and b in the order
// of attributes.
type attrKey struct {
	kind attrKind
	a, b string
}

// attributes is the attribute set k stands for.
func (k attrKey) attributes() attribute.Set {
	switch k.kind {
	case requestsAttrs:
		return attribute.NewSet(PolicyKey.String(k.a), ResultKey.String(k.b))
	case durationAttrs:
		return attribute.NewSet(StoreKey.String(k.a))
	case storeErrorAttrs:
		return attribute.NewSet(ErrorTypeKey.String(k.a))
	}
	return attribute.NewSet(PolicyKey.String(k.a))
}

// addOptions returns the options of a counter's measurement with k's
// attributes, as a slice so the variadic call allocates none.
func (m *Metrics) addOptions(k attrKey) []metric.AddOption {
	if o, ok := m.adds.Load(k); ok {
		return o.([]metric.AddOption)
	}
	o, _ := m.adds.LoadOrStore(k, []metric.AddOption{metric.WithAttributeSet(k.attributes())})
	return o.([]metric.AddOption)
}

// recordOptions is addOptions for histograms and gauges.
func (m *Metrics) recordOptions(k attrKey) []metric.RecordOption {
	if o, ok := m.records.Load(k); ok {
		return o.([]metric.RecordOption)
	}
	o, _ := m.records.LoadOrStore(k, []metric.RecordOption{metric.WithAttributeSet(k.attributes())})
	return o.([]metric.RecordOption)
}
