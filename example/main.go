// Command example is a small API on chi that shows redlimit's per-route
// limits: each of the five algorithms, keys by client IP, API key and JWT
// subject, a request cost above 1, and free and pro tiers. It is a module
// of its own (it uses config, metrics and jwtkey); in its folder:
//
//	go run .                                 # memory store
//	REDIS_URL=redis://localhost:6379/0 go run .
//	go run . -mint-token alice               # print a demo JWT for alice
//	go run . -config redlimit.yaml           # the limits from a file; SIGHUP reloads it
//	OPERATOR_TOKEN=s3cret go run .           # serve the operator handler under /ops/
//
// GET / lists the routes and their limits as JSON. With -operator-token
// (or $OPERATOR_TOKEN), requests bearing it ("Authorization: Bearer
// s3cret") may list the policies, peek at a client and reset it; with
// -config, the policies are the file's, and a reload's once it is in
// force:
//
//	curl -H 'Authorization: Bearer s3cret' localhost:8080/ops/policies
//	curl -X POST -H 'Authorization: Bearer s3cret' 'localhost:8080/ops/policies/login?identity=ip:127.0.0.1'
//
// See the operator package and docs/operating.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/config"
	"github.com/redlimit/redlimit/internal/redisurl"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/metrics"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/operator"
	"github.com/redlimit/redlimit/redisstore"
)

// demoSecret signs demo tokens when neither -jwt-secret nor JWT_SECRET is
// set. It is public: never use it outside a demo.
const demoSecret = "redlimit-demo-secret-not-for-production"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

// options are what the flags and the environment set.
type options struct {
	addr      string
	config    string
	redisURL  string
	jwtSecret string
	apiKeys   string
	proKeys   string
	mintToken string
	instances int
	opsToken  string
}

func parseFlags(args []string, out io.Writer) (options, error) {
	fs := flag.NewFlagSet("example", flag.ContinueOnError)
	fs.SetOutput(out)
	var c options
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&c.config, "config", "", "YAML file of policies, routes and store (see redlimit.yaml); SIGHUP reloads it; -redis and -instances then do not apply")
	fs.StringVar(&c.redisURL, "redis", os.Getenv("REDIS_URL"), "Redis URL (default $REDIS_URL); empty means the in-memory store")
	fs.StringVar(&c.jwtSecret, "jwt-secret", envOr("JWT_SECRET", demoSecret), "HS256 secret for bearer tokens (default $JWT_SECRET, else a public demo secret)")
	fs.StringVar(&c.apiKeys, "api-keys", envOr("API_KEYS", "free-demo-key"), "comma-separated API keys on the free plan (default $API_KEYS)")
	fs.StringVar(&c.proKeys, "pro-keys", envOr("PRO_KEYS", "pro-demo-key"), "comma-separated API keys on the pro plan (default $PRO_KEYS)")
	fs.StringVar(&c.mintToken, "mint-token", "", "print an HS256 demo token for this subject, valid one hour, and exit")
	fs.StringVar(&c.opsToken, "operator-token", "", "serve the operator handler (list policies, peek at and reset a client) under /ops/ to requests with \"Authorization: Bearer <token>\" (default $OPERATOR_TOKEN); empty turns it off; with -config, it serves the file's policies and follows reloads")
	fs.IntVar(&c.instances, "instances", 1, "how many instances share the Redis limits: each enforces 1/n of them while Redis cannot decide")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.instances < 1 {
		return c, fmt.Errorf("-instances %d: must be at least 1", c.instances)
	}
	var clash error
	tokenSet := false
	fs.Visit(func(f *flag.Flag) {
		tokenSet = tokenSet || f.Name == "operator-token"
		if c.config != "" && (f.Name == "redis" || f.Name == "instances") {
			clash = fmt.Errorf("-%s does not apply with -config: the file's redis section sets the store", f.Name)
		}
	})
	if !tokenSet {
		// Not a flag's default: -h would print the token.
		c.opsToken = os.Getenv("OPERATOR_TOKEN")
	}
	return c, clash
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func run(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	if cfg.mintToken != "" {
		token, err := mintToken(cfg.jwtSecret, cfg.mintToken, time.Now(), time.Hour)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, token)
		return nil
	}

	logger := slog.New(slog.NewTextHandler(out, nil))
	// The limiter's metrics, served at GET /metrics.
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		return err
	}
	var handler http.Handler
	var describe string
	if cfg.config != "" {
		rt, err := newConfiguredAPI(cfg, logger, m, reg)
		if err != nil {
			return err
		}
		defer closeWithin(logger, rt.Close)
		handler, describe = rt.handler, rt.Store()+", policies from "+cfg.config
		stopReloads := reloadOnSIGHUP(rt.Runtime, cfg.config)
		defer stopReloads()
	} else {
		store, desc, closeStore, err := openStore(cfg.redisURL, cfg.instances, logger, m)
		if err != nil {
			return err
		}
		defer closeWithin(logger, closeStore)
		if handler, err = newAPI(store, cfg, logger, m, reg); err != nil {
			return err
		}
		describe = desc
	}

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "redlimit example listening on http://%s, limits kept in %s\n", ln.Addr(), describe)
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintln(out, "shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// closeTimeout bounds how long the example, shutting down, lets its store
// send Redis what it owes (see redisstore.Store.Close).
const closeTimeout = 2 * time.Second

// closeWithin calls closeStore at shutdown, with closeTimeout to send Redis
// what the store owes, and logs what it could not.
func closeWithin(logger *slog.Logger, closeStore func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := closeStore(ctx); err != nil {
		logger.LogAttrs(ctx, slog.LevelWarn, "redlimit example: store closed with an error", slog.Any("error", err))
	}
}

// openStore returns the Redis store when url is set, else the memory store,
// with a description that names no password, and the function that closes
// it (the store, then the client) at shutdown.
func openStore(url string, instances int, logger *slog.Logger, obs redisstore.Observer) (algorithms.Store, string, func(context.Context) error, error) {
	if url == "" {
		store, err := memstore.New()
		return store, "memory (this process only)", store.Close, err
	}
	// Not redis.ParseURL: its errors quote the URL, which may hold a password.
	opts, err := redisurl.Parse(url)
	if err != nil {
		return nil, "", nil, fmt.Errorf("-redis: %w", err)
	}
	// go-redis may send a script call again after a lost reply: the call
	// then returns its first answer, so it counts once. (The store keeps its
	// own deadline, whatever the client's timeouts.)
	client := redis.NewClient(opts)
	store, err := redisstore.New(client, redisstore.WithPrefix("redlimit-example"),
		redisstore.WithInstances(instances), redisstore.WithLogger(logger), redisstore.WithObserver(obs))
	if err != nil {
		_ = client.Close()
		return nil, "", nil, err
	}
	closeStore := func(ctx context.Context) error {
		defer client.Close() // after the store
		return store.Close(ctx)
	}
	return store, fmt.Sprintf("Redis at %s db %d", opts.Addr, opts.DB), closeStore, nil
}

// mintToken signs a demo token for subject with secret.
func mintToken(secret, subject string, now time.Time, valid time.Duration) (string, error) {
	claims := jwt.RegisteredClaims{
		Subject:   subject,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(valid)),
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
}

// newAPI builds the router from builtinRoutes: every route has its own
// limiter, so no two routes share a counter. With a Redis store, a
// decision Redis cannot make in time is made in memory with the same
// limits (the store's default FailLocal), so the API stays limited, per
// instance, while Redis is away.
func newAPI(store algorithms.Store, cfg options, logger *slog.Logger, m *metrics.Metrics, reg *prometheus.Registry) (http.Handler, error) {
	id := newIdentities(cfg)
	keyFuncs := map[string]keyfunc.KeyFunc{
		"ip":      keyfunc.IP(),
		"api_key": keyfunc.APIKey("X-API-Key", keyfunc.KnownAPIKey(id.isKnown)),
		"jwt":     id.jwtFunc,
	}
	exports, err := algorithms.NewConcurrency(store, exportsInFlight, time.Minute)
	if err != nil {
		return nil, err
	}
	hs, err := handlers(exports, logger)
	if err != nil {
		return nil, err
	}
	r := chi.NewRouter()
	var ops []operator.Policy
	for _, rt := range builtinRoutes {
		limiter, err := algorithms.New(store, rt.Algorithm, rt.Limits...)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", rt.Method, rt.Path, err)
		}
		routes := []string{rt.Path} // chi's pattern, what the middleware counts by
		ops = append(ops, operator.Policy{Name: rt.Policy, Limiter: limiter, Routes: routes})
		opts := []middleware.Option{
			middleware.WithKeyFunc(keyFuncs[rt.Key]),
			middleware.WithLogger(logger),
			middleware.WithPolicyName(rt.Policy),
			middleware.WithObserver(m),
		}
		if rt.Delay > 0 {
			opts = append(opts, middleware.WithDelay(rt.Delay))
		}
		if cost := rt.Cost; cost > 1 {
			opts = append(opts, middleware.WithCost(func(*http.Request) int { return cost }))
		}
		if len(rt.Plans) > 0 {
			plans := map[string]algorithms.Limiter{}
			for name, p := range rt.Plans {
				l, err := algorithms.New(store, p.Algorithm, p.Limits...)
				if err != nil {
					return nil, fmt.Errorf("%s %s plan %s: %w", rt.Method, rt.Path, name, err)
				}
				plans[name] = l
				ops = append(ops, operator.Policy{Name: rt.Policy + ":" + name, Limiter: l, Routes: routes})
			}
			opts = append(opts, middleware.WithLimiterFunc(func(r *http.Request, key string) algorithms.Limiter {
				return plans[id.plan(r, key)] // nil: the policy's own limiter
			}))
		}
		mw, err := middleware.New(limiter, opts...)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", rt.Method, rt.Path, err)
		}
		r.With(mw).Method(rt.Method, rt.Path, hs[rt.Method+" "+rt.Path])
	}
	serveIndex(r, reg, func() []config.RouteInfo { return builtinRoutes })
	newOps := func() (http.Handler, error) { return operator.New(ops, operator.WithLogger(logger)) }
	if err := mountOperator(r, cfg.opsToken, newOps); err != nil {
		return nil, err
	}
	return r, nil
}

// serveIndex adds GET /, the routes as JSON, and GET /metrics to r.
func serveIndex(r chi.Router, reg *prometheus.Registry, routes func() []config.RouteInfo) {
	r.Get("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"routes": routeDocs(routes())})
	})
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
}

func reply(message string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"message": message})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
