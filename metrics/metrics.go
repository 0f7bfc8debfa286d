// Package metrics exports what redlimit's middleware and Redis store do as
// Prometheus metrics. One *Metrics serves as both a middleware.Observer and
// an redisstore.Observer:
//
//	m, err := metrics.New(prometheus.DefaultRegisterer)
//	store, err := redisstore.New(client, redisstore.WithObserver(m))
//	mw, err := middleware.New(limiter, middleware.WithObserver(m), middleware.WithPolicyName("search"))
//	http.Handle("GET /metrics", promhttp.Handler())
//
// The metrics:
//
//	redlimit_requests_total{policy, result}      counter: each request's outcome
//	redlimit_decision_duration_seconds{store}    histogram: how long the limiter took
//	redlimit_store_errors_total{kind}            counter: failed script calls
//	redlimit_breaker_open{policy}                gauge: 1 while a breaker is open
//
// result is one of the middleware's Outcome constants: allowed, denied,
// shadow_denied, fail_open, fail_closed, local_allowed, local_denied,
// cache_denied, key_error, invalid, skipped (exempted by WithSkip, with no
// duration observed). store is memory, redis or custom. kind is timeout,
// connection, script or other. The breaker gauge's policy is the
// middleware's policy name for its own breaker, and the store's prefix for
// a Redis store's.
//
// It is a module of its own, github.com/redlimit/redlimit/metrics, so that
// only the programs that use it compile Prometheus.
package metrics

import (
	"fmt"
	"reflect"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/redisstore"
)

// DurationBuckets are the decision duration histogram's buckets, in
// seconds: 10 µs to 1 s, about three per decade, for memory decisions
// (microseconds), Redis round trips (sub-millisecond to milliseconds) and
// deadlines (100 ms).
var DurationBuckets = []float64{
	10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
	0.1, 0.25, 0.5, 1,
}

// Metrics holds redlimit's collectors. It implements middleware.Observer
// and redisstore.Observer; its methods are safe for concurrent use.
type Metrics struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	storeErrors *prometheus.CounterVec
	breakerOpen *prometheus.GaugeVec
}

var (
	_ middleware.Observer = (*Metrics)(nil)
	_ redisstore.Observer = (*Metrics)(nil)
)

// New creates the collectors and registers them on reg. It fails, wrapping
// the registry's error, when they are registered already, and with an error
// wrapping algorithms.ErrInvalidOption for a nil reg (or a nil pointer in
// one).
func New(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, fmt.Errorf("metrics: %w: nil Registerer", algorithms.ErrInvalidOption)
	}
	if v := reflect.ValueOf(reg); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, fmt.Errorf("metrics: %w: nil %T", algorithms.ErrInvalidOption, reg)
	}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redlimit_requests_total",
			Help: "Requests seen by the rate-limiting middleware, by policy and outcome.",
		}, []string{"policy", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "redlimit_decision_duration_seconds",
			Help:    "Time the limiter took to decide a request, by store.",
			Buckets: DurationBuckets,
		}, []string{"store"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redlimit_store_errors_total",
			Help: "Failed Redis script calls, by kind: timeout, connection, script, other.",
		}, []string{"kind"}),
		breakerOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "redlimit_breaker_open",
			Help: "1 while the breaker of a middleware policy or a Redis store (by prefix) is open.",
		}, []string{"policy"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.storeErrors, m.breakerOpen} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return m, nil
}

// Decision implements middleware.Observer.
func (m *Metrics) Decision(d middleware.Decision) {
	m.requests.WithLabelValues(d.Policy, d.Outcome).Inc()
	if d.Store != "" {
		m.duration.WithLabelValues(d.Store).Observe(d.Duration.Seconds())
	}
}

// BreakerChanged implements middleware.Observer and redisstore.Observer.
func (m *Metrics) BreakerChanged(policy string, open bool) {
	v := 0.0
	if open {
		v = 1
	}
	m.breakerOpen.WithLabelValues(policy).Set(v)
}

// StoreError implements redisstore.Observer.
func (m *Metrics) StoreError(kind redisstore.ErrorKind) {
	m.storeErrors.WithLabelValues(string(kind)).Inc()
}
