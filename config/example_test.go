package config_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/config"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
)

// A file of two policies, built with the check of API keys it names,
// mounted on chi; then reloaded with a higher login limit.
func Example() {
	file := []byte(`
policies:
  login:
    algorithm: sliding_window_log
    limits: [{rate: 2, period: 1m}]
    key: ip
  reports:
    algorithm: token_bucket
    limits: [{rate: 30, period: 1m, burst: 5}]
    key: {kind: api_key, header: X-API-Key, known_keys: customers}
routes:
  - {method: POST, path: /login, policy: login}
  - {method: GET, path: /reports, policy: reports}
`)
	cfg, err := config.Parse(file, "redlimit.yaml")
	if err != nil {
		log.Fatal(err)
	}
	customers := map[string]bool{keyfunc.HashAPIKey("k-123"): true}
	rt, err := cfg.Build(config.WithKnownKeys("customers", func(raw string) bool {
		return customers[keyfunc.HashAPIKey(raw)]
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		// At shutdown: a Redis store sends what it owes until the deadline.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			log.Print(err)
		}
	}()

	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	r := chi.NewRouter()
	if err := rt.Mount(r, map[string]http.Handler{"POST /login": ok, "GET /reports": ok}); err != nil {
		log.Fatal(err)
	}
	login := func() int {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/login", nil))
		return rec.Code
	}
	fmt.Println(login(), login(), login())

	// Reload (on SIGHUP, say) with another limit: new limits, a new count.
	cfg, err = config.Parse([]byte(`
policies:
  login:
    algorithm: sliding_window_log
    limits: [{rate: 3, period: 1m}]
    key: ip
  reports:
    algorithm: token_bucket
    limits: [{rate: 30, period: 1m, burst: 5}]
    key: {kind: api_key, header: X-API-Key, known_keys: customers}
routes:
  - {method: POST, path: /login, policy: login}
  - {method: GET, path: /reports, policy: reports}
`), "redlimit.yaml")
	if err != nil {
		log.Fatal(err)
	}
	if err := rt.Reload(cfg); err != nil {
		log.Fatal(err)
	}
	fmt.Println(login(), login(), login(), login())

	// A bad file is refused, naming the line and the field.
	_, err = config.Parse([]byte("policies:\n  login:\n    algorithm: sliding_window\n"), "redlimit.yaml")
	fmt.Println(err)
	// Output:
	// 200 200 429
	// 200 200 200 429
	// redlimit.yaml:1: routes: missing: assign at least one route to a policy
	// redlimit.yaml:3: policies.login.algorithm: "sliding_window" is not one of fixed_window, sliding_window_log, sliding_window_counter, token_bucket, leaky_bucket
	// redlimit.yaml:3: policies.login.limits: missing: at least one {rate, period}
	// redlimit.yaml:3: policies.login.key: missing: ip, {kind: api_key, ...} or {kind: func, name: ...}
}

// The store on the application's own go-redis client (here a Sentinel
// FailoverClient), the file giving only the store's settings, and the
// routes on a net/http ServeMux. Making the client does not dial Redis:
// until it is reachable, the store's failure mode decides.
func Example_applicationClient() {
	client := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            "main",
		SentinelAddrs:         []string{"127.0.0.1:26379", "127.0.0.1:26380"},
		ContextTimeoutEnabled: true, // a decision's deadline bounds its commands
	})
	defer client.Close() // the application's: the runtime never closes it

	cfg, err := config.Parse([]byte(`
redis: {prefix: myapp, timeout: 100ms, failure_mode: local}
policies:
  login:
    algorithm: sliding_window_log
    limits: [{rate: 5, period: 1m}]
    key: ip
routes:
  - {method: POST, path: /login, policy: login}
`), "redlimit.yaml")
	if err != nil {
		log.Fatal(err)
	}
	rt, err := cfg.Build(config.WithRedisClient(client))
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(closeCtx())
	mux := http.NewServeMux()
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	if err := rt.MountMux(mux, map[string]http.Handler{"POST /login": ok}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(rt.Store())

	// A file may not name a connection beside the application's client.
	cfg, _ = config.Parse([]byte(`
redis: {addr: "10.0.0.9:6379"}
policies:
  login: {algorithm: fixed_window, limits: [{rate: 5, period: 1m}], key: ip}
routes:
  - {method: POST, path: /login, policy: login}
`), "redlimit.yaml")
	_, err = cfg.Build(config.WithRedisClient(client))
	fmt.Println(err)
	// Output:
	// Redis through the application's client
	// redlimit.yaml:2: redis.addr: the application gives the Redis client (config.WithRedisClient), which has its own: keep the connection in one place
}

// The application's store, shared with its own limiters.
func Example_applicationStore() {
	store, err := memstore.New()
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
policies:
  api: {algorithm: token_bucket, limits: [{rate: 10, period: 1s, burst: 20}], key: ip}
routes:
  - {method: GET, path: "/api/*", policy: api}
`), "redlimit.yaml")
	if err != nil {
		log.Fatal(err)
	}
	rt, err := cfg.Build(config.WithStore(store))
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(context.Background()) // leaves the store open: nothing to wait for
	fmt.Println(rt.Store())
	// Output:
	// the application's store
}
