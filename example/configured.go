package main

import (
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/config"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/metrics"
	"github.com/redlimit/redlimit/operator"
)

// configuredAPI is the API with its limits from a -config file.
type configuredAPI struct {
	*config.Runtime
	handler http.Handler
}

// newConfiguredAPI loads the -config file and mounts the example's
// handlers behind its policies, and the operator handler with
// -operator-token. The file names what needs code: the
// "jwt" key function (the token secret stays out of the file), the
// "demo_keys" check of API keys and the "pro_keys" plan resolver.
func newConfiguredAPI(cfg options, logger *slog.Logger, m *metrics.Metrics, reg *prometheus.Registry) (*configuredAPI, error) {
	c, err := config.Load(cfg.config)
	if err != nil {
		return nil, err
	}
	id := newIdentities(cfg)
	rt, err := c.Build(
		config.WithLogger(logger),
		config.WithObserver(m),
		config.WithKeyFunc("jwt", id.jwtFunc),
		config.WithKnownKeys("demo_keys", id.isKnown),
		config.WithPlanResolver("pro_keys", id.plan),
	)
	if err != nil {
		return nil, err
	}
	r := chi.NewRouter()
	// The file has no concurrency limits: this one is set in code, in
	// this instance's memory (a reload may replace the file's store).
	local, err := memstore.New()
	if err != nil {
		closeWithin(logger, rt.Close)
		return nil, err
	}
	exports, err := algorithms.NewConcurrency(local, exportsInFlight, time.Minute)
	if err != nil {
		closeWithin(logger, rt.Close)
		return nil, err
	}
	hs, err := handlers(exports, logger)
	if err != nil {
		closeWithin(logger, rt.Close)
		return nil, err
	}
	if err := rt.Mount(r, hs); err != nil {
		closeWithin(logger, rt.Close)
		return nil, err
	}
	// The operator handler serves the policies in force: a reload's, once
	// it is swapped in.
	newOps := func() (http.Handler, error) { return rt.Operator(operator.WithLogger(logger)) }
	if err := mountOperator(r, cfg.opsToken, newOps); err != nil {
		closeWithin(logger, rt.Close)
		return nil, err
	}
	// The list follows reloads.
	serveIndex(r, reg, func() []config.RouteInfo { return rt.Config().Describe() })
	return &configuredAPI{Runtime: rt, handler: r}, nil
}

// reloadOnSIGHUP reloads path into rt on every SIGHUP until the returned
// function is called. A file that does not load keeps the running
// configuration; ReloadFile logs why.
func reloadOnSIGHUP(rt *config.Runtime, path string) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				_ = rt.ReloadFile(path)
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}
