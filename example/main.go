// Command example is a small API on chi that shows redlimit's per-route
// limits: each of the five algorithms, keys by client IP, API key and JWT
// subject, a request cost above 1, and free and pro tiers.
//
//	go run ./example                         # memory store
//	REDIS_URL=redis://localhost:6379/0 go run ./example
//	go run ./example -mint-token alice       # print a demo JWT for alice
//
// GET / lists the routes and their limits as JSON.
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
	"strings"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/metrics"
	"github.com/redlimit/redlimit/middleware"
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

// config is what the flags and the environment set.
type config struct {
	addr      string
	redisURL  string
	jwtSecret string
	apiKeys   string
	proKeys   string
	mintToken string
	instances int
}

func parseFlags(args []string, out io.Writer) (config, error) {
	fs := flag.NewFlagSet("example", flag.ContinueOnError)
	fs.SetOutput(out)
	var c config
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&c.redisURL, "redis", os.Getenv("REDIS_URL"), "Redis URL (default $REDIS_URL); empty means the in-memory store")
	fs.StringVar(&c.jwtSecret, "jwt-secret", envOr("JWT_SECRET", demoSecret), "HS256 secret for bearer tokens (default $JWT_SECRET, else a public demo secret)")
	fs.StringVar(&c.apiKeys, "api-keys", envOr("API_KEYS", "free-demo-key"), "comma-separated API keys on the free plan (default $API_KEYS)")
	fs.StringVar(&c.proKeys, "pro-keys", envOr("PRO_KEYS", "pro-demo-key"), "comma-separated API keys on the pro plan (default $PRO_KEYS)")
	fs.StringVar(&c.mintToken, "mint-token", "", "print an HS256 demo token for this subject, valid one hour, and exit")
	fs.IntVar(&c.instances, "instances", 1, "how many instances share the Redis limits: each enforces 1/n of them while Redis cannot decide")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.instances < 1 {
		return c, fmt.Errorf("-instances %d: must be at least 1", c.instances)
	}
	return c, nil
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
	store, describe, closeStore, err := openStore(cfg.redisURL, cfg.instances, logger, m)
	if err != nil {
		return err
	}
	defer closeStore()
	handler, err := newAPI(store, cfg, logger, m, reg)
	if err != nil {
		return err
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

// openStore returns the Redis store when url is set, else the memory store,
// with a description that names no password.
func openStore(url string, instances int, logger *slog.Logger, obs algorithms.Observer) (algorithms.Store, string, func(), error) {
	if url == "" {
		return algorithms.NewMemoryStore(), "memory (this process only)", func() {}, nil
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, "", nil, fmt.Errorf("-redis: %w", err)
	}
	// go-redis may send a script call again after a lost reply: the call
	// then returns its first answer, so it counts once. (The store keeps its
	// own deadline, whatever the client's timeouts.)
	client := redis.NewClient(opts)
	store := algorithms.NewRedisStore(client, algorithms.WithPrefix("redlimit-example"),
		algorithms.WithInstances(instances), algorithms.WithLogger(logger), algorithms.WithObserver(obs))
	return store,
		fmt.Sprintf("Redis at %s db %d", opts.Addr, opts.DB), func() { client.Close() }, nil
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

// route describes one limited route for GET /.
type route struct {
	Method    string     `json:"method"`
	Path      string     `json:"path"`
	Algorithm string     `json:"algorithm"`
	Limits    []limitDoc `json:"limits"`
	Key       string     `json:"key"`
	Cost      int        `json:"cost,omitempty"`
	Plan      string     `json:"plan,omitempty"`
}

type limitDoc struct {
	Rate          int     `json:"rate"`
	PeriodSeconds float64 `json:"period_seconds"`
	Burst         int     `json:"burst,omitempty"`
}

// newAPI builds the router: every route has its own limiter, so no two
// routes share a counter. With a Redis store, a decision Redis cannot make
// in time is made in memory with the same limits (the store's default
// FailLocal), so the API stays limited, per instance, while Redis is away.
func newAPI(store algorithms.Store, cfg config, logger *slog.Logger, m *metrics.Metrics, reg *prometheus.Registry) (http.Handler, error) {
	secret := []byte(cfg.jwtSecret)
	// Keys are remembered by their hash only. Unknown keys are refused, so
	// nobody can make up a key to get a fresh limit.
	known, proKeys := hashedKeys(cfg.apiKeys), hashedKeys(cfg.proKeys)
	for h := range proKeys {
		known[h] = true
	}
	keyFuncs := map[string]keyfunc.KeyFunc{
		"ip": keyfunc.IP(),
		"api_key": keyfunc.APIKey("X-API-Key", keyfunc.KnownAPIKey(func(raw string) bool {
			return known[keyfunc.HashAPIKey(raw)]
		})),
		"jwt": keyfunc.JWTSubject(func(*jwt.Token) (any, error) { return secret, nil },
			jwt.WithValidMethods([]string{"HS256"})),
	}

	r := chi.NewRouter()
	var routes []route
	// limit mounts handler at method and path behind a limiter of its own.
	limit := func(method, path, key string, cost int, alg algorithms.Algorithm, limits []algorithms.Limit, handler http.HandlerFunc, extra ...middleware.Option) error {
		limiter, err := algorithms.New(store, alg, limits...)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		opts := append([]middleware.Option{
			middleware.WithKeyFunc(keyFuncs[key]),
			middleware.WithLogger(logger),
			middleware.WithPolicyName(policyName(path)),
			middleware.WithObserver(m),
		}, extra...)
		if cost > 1 {
			opts = append(opts, middleware.WithCost(func(*http.Request) int { return cost }))
		}
		r.With(middleware.New(limiter, opts...)).Method(method, path, handler)
		doc := route{Method: method, Path: path, Algorithm: string(alg), Key: key}
		if cost > 1 {
			doc.Cost = cost
		}
		for _, l := range limits {
			d := limitDoc{Rate: l.Rate, PeriodSeconds: l.Period.Seconds()}
			if alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket {
				d.Burst = l.Burst
			}
			doc.Limits = append(doc.Limits, d)
		}
		routes = append(routes, doc)
		return nil
	}

	per := algorithms.PerMinute
	steps := []error{
		limit(http.MethodGet, "/api/items", "ip", 1, algorithms.FixedWindow,
			[]algorithms.Limit{per(60)}, reply("items")),
		limit(http.MethodGet, "/api/search", "ip", 1, algorithms.SlidingWindowCounter,
			[]algorithms.Limit{algorithms.PerSecond(5), per(100)}, reply("search results")),
		limit(http.MethodPost, "/login", "ip", 1, algorithms.SlidingWindowLog,
			[]algorithms.Limit{per(5)}, reply("logged in")),
		limit(http.MethodPost, "/api/export", "ip", 5, algorithms.TokenBucket,
			[]algorithms.Limit{per(20).WithBurst(10)}, reply("export started")),
		limit(http.MethodGet, "/api/reports", "api_key", 1, algorithms.TokenBucket,
			[]algorithms.Limit{per(30).WithBurst(5)}, reply("reports")),
		limit(http.MethodGet, "/api/me", "jwt", 1, algorithms.LeakyBucket,
			[]algorithms.Limit{algorithms.PerSecond(2).WithBurst(4)}, reply("hello, token holder")),
	}
	for _, err := range steps {
		if err != nil {
			return nil, err
		}
	}

	// Tiers: the free plan's limiter is the route's own; pro keys get theirs.
	pro, err := algorithms.New(store, algorithms.FixedWindow, per(100))
	if err != nil {
		return nil, err
	}
	pickPlan := middleware.WithLimiterFunc(func(_ *http.Request, key string) algorithms.Limiter {
		if proKeys[strings.TrimPrefix(key, "key:")] {
			return pro
		}
		return nil // the free limiter
	})
	if err := limit(http.MethodGet, "/api/plan", "api_key", 1, algorithms.FixedWindow,
		[]algorithms.Limit{per(5)}, reply("plan data"), pickPlan); err != nil {
		return nil, err
	}
	routes[len(routes)-1].Plan = "free: 5/min; pro (-pro-keys): 100/min"

	r.Get("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"routes": routes})
	})
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return r, nil
}

// hashedKeys returns the hashes of the comma-separated keys in list.
func hashedKeys(list string) map[string]bool {
	hashes := map[string]bool{}
	for _, k := range strings.Split(list, ",") {
		if k = strings.TrimSpace(k); k != "" {
			hashes[keyfunc.HashAPIKey(k)] = true
		}
	}
	return hashes
}

func policyName(path string) string {
	return strings.Trim(strings.ReplaceAll(path, "/", "-"), "-")
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
