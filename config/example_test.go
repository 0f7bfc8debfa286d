package config_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/go-chi/chi/v5"

	"github.com/redlimit/redlimit/config"
	"github.com/redlimit/redlimit/keyfunc"
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
	defer rt.Close()

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
