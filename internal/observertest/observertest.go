// Package observertest replays the scripted sequences of requests and store
// failures that the tests of package metrics (Prometheus) and otelmetrics
// (OpenTelemetry) both read back, each in its own format: one script, so
// the two exporters are held to the same counts.
package observertest

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/redisstore"
)

// Observer is what both exporters implement: the middleware's and the
// Redis store's observer.
type Observer interface {
	middleware.Observer
	redisstore.Observer
}

// Replay drives obs through three policies and then waits until seen,
// which reads the exporter's own output, reports the Redis store's breaker
// open and its refused connection counted (the call reports its error
// after the refusal has opened the breaker). What obs has seen by then,
// and nothing else:
//
//	policy  outcome        requests
//	search  allowed        2
//	search  denied         1
//	search  key_error      1
//	shadow  allowed        1
//	shadow  shadow_denied  2
//	api     allowed        1
//	api     local_allowed  6
//
// store errors: 1 script, 1 connection; the breaker of policy api open;
// decision durations: 6 of store memory, 7 of store redis, each under 1 s.
func Replay(t *testing.T, obs Observer, seen func() bool) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	clock := storetest.NewManualClock(time.Unix(1_800_000_000, 0))
	mem := must(memstore.New(memstore.WithClock(clock.Now)))

	// search: 2 allowed, 1 denied, 1 key error (an unknown API key).
	search := mustMiddleware(t, mustNew(t, mem, algorithms.FixedWindow, algorithms.PerMinute(2)),
		middleware.WithObserver(obs), middleware.WithPolicyName("search"), middleware.WithClock(clock.Now),
		middleware.WithCountCredentialFailures(false),
		middleware.WithKeyFunc(keyfunc.APIKey("X-API-Key", keyfunc.KnownAPIKey(func(raw string) bool { return raw == "k" }))))(ok)
	for range 3 {
		send(search, "192.0.2.1:1", "X-API-Key", "k")
	}
	send(search, "192.0.2.1:1", "X-API-Key", "guess")

	// shadow: 1 allowed, 2 shadow_denied.
	shadow := mustMiddleware(t, mustNew(t, mem, algorithms.TokenBucket, algorithms.PerMinute(1)),
		middleware.WithObserver(obs), middleware.WithPolicyName("shadow"), middleware.WithShadow(true),
		middleware.WithClock(clock.Now), middleware.WithLogger(quiet))(ok)
	for range 3 {
		send(shadow, "192.0.2.2:1")
	}

	// Redis: 1 allowed; under OOM a new key is decided locally (1 store
	// error of kind script); with Redis gone, the first refused connection
	// opens the breaker at once (1 store error of kind connection), and the
	// five keys are decided locally.
	srv := redistest.StartServer(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer client.Close()
	store := must(redisstore.New(client, redisstore.WithObserver(obs), redisstore.WithLogger(quiet), redisstore.WithPrefix("api")))
	defer func() { // before the client; Redis is stopped by then: a short wait
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = store.Close(ctx)
	}()
	api := mustMiddleware(t, mustNew(t, store, algorithms.FixedWindow, algorithms.PerMinute(5)),
		middleware.WithObserver(obs), middleware.WithPolicyName("api"))(ok)
	send(api, "192.0.2.3:1")
	if err := client.ConfigSet(context.Background(), "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	send(api, "192.0.2.4:1")
	// The local admission is owed to Redis: once Redis has room the store
	// sends it (trying every 250 ms at most) and stops trying, so that the
	// first call to meet the stopped server is a request's, not the
	// settler's, whose refused dial would open the breaker unreported.
	if err := client.ConfigSet(context.Background(), "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	srv.Stop()
	for i := range 5 {
		send(api, "192.0.2."+string(rune('5'+i))+":1")
	}
	waitFor(t, seen)
}

// ReplaySkipped sends five requests through policy api on a memory store,
// four of them exempted by WithSkip. What obs has seen: 1 allowed and 4
// skipped requests, and one decision duration (of store memory), since no
// limiter was asked about the skipped ones.
func ReplaySkipped(t *testing.T, obs Observer) {
	t.Helper()
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	h := mustMiddleware(t, mustNew(t, must(memstore.New()), algorithms.FixedWindow, algorithms.PerMinute(5)),
		middleware.WithObserver(obs), middleware.WithPolicyName("api"),
		middleware.WithSkip(func(r *http.Request) bool { return r.RemoteAddr == "192.0.2.9:1" }))(ok)
	for range 4 {
		send(h, "192.0.2.9:1")
	}
	send(h, "192.0.2.1:1")
}

// must returns a store New made, and panics with New's error: the stores
// here are made with valid options.
func must[S any](s S, err error) S {
	if err != nil {
		panic(err)
	}
	return s
}

func send(h http.Handler, addr string, header ...string) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = addr
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	h.ServeHTTP(httptest.NewRecorder(), r)
}

func mustNew(t *testing.T, store algorithms.Store, alg algorithms.Algorithm, l algorithms.Limit) algorithms.Limiter {
	t.Helper()
	lim, err := algorithms.New(store, alg, l)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

func mustMiddleware(t *testing.T, l algorithms.Limiter, opts ...middleware.Option) func(http.Handler) http.Handler {
	t.Helper()
	mw, err := middleware.New(l, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

// waitFor polls cond every 20 ms for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("timed out waiting")
}
