package main

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/config"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/keyfunc/jwtkey"
	"github.com/redlimit/redlimit/middleware"
)

// builtinRoutes are the limited routes when no -config is given.
// redlimit.yaml describes the same set (a test holds the two equal).
var builtinRoutes = []config.RouteInfo{
	{Method: http.MethodGet, Path: "/api/items", Policy: "api-items", Algorithm: algorithms.FixedWindow,
		Limits: []algorithms.Limit{algorithms.PerMinute(60)}, Key: "ip", Cost: 1},
	{Method: http.MethodGet, Path: "/api/search", Policy: "api-search", Algorithm: algorithms.SlidingWindowCounter,
		Limits: []algorithms.Limit{algorithms.PerSecond(5), algorithms.PerMinute(100)}, Key: "ip", Cost: 1},
	{Method: http.MethodPost, Path: "/login", Policy: "login", Algorithm: algorithms.SlidingWindowLog,
		Limits: []algorithms.Limit{algorithms.PerMinute(5)}, Key: "ip", Cost: 1},
	{Method: http.MethodPost, Path: "/api/export", Policy: "api-export", Algorithm: algorithms.TokenBucket,
		Limits: []algorithms.Limit{algorithms.PerMinute(20).WithBurst(10)}, Key: "ip", Cost: 5},
	{Method: http.MethodGet, Path: "/api/reports", Policy: "api-reports", Algorithm: algorithms.TokenBucket,
		Limits: []algorithms.Limit{algorithms.PerMinute(30).WithBurst(5)}, Key: "api_key", Cost: 1},
	{Method: http.MethodGet, Path: "/api/me", Policy: "api-me", Algorithm: algorithms.LeakyBucket,
		Limits: []algorithms.Limit{algorithms.PerSecond(2).WithBurst(4)}, Key: "jwt", Cost: 1,
		// A request the bucket would admit within half a second waits its
		// turn rather than being refused.
		Delay: 500 * time.Millisecond},
	// Tiers: keys from -api-keys are on the free plan, the policy's own
	// limits; keys from -pro-keys on the pro plan.
	{Method: http.MethodGet, Path: "/api/plan", Policy: "api-plan", Algorithm: algorithms.FixedWindow,
		Limits: []algorithms.Limit{algorithms.PerMinute(5)}, Key: "api_key", Cost: 1,
		Plans: map[string]config.Plan{"pro": {Algorithm: algorithms.FixedWindow, Limits: []algorithms.Limit{algorithms.PerMinute(100)}}}},
}

// exportsInFlight is how many exports one client may run at once.
const exportsInFlight = 2

// handlers are the example's endpoints, by route, whichever set limits
// them. Exports, slow in a real API, also have a concurrency limit, inside
// their rate limit: at most exportsInFlight per client at once.
func handlers(exports algorithms.ConcurrencyLimiter, logger *slog.Logger) (map[string]http.Handler, error) {
	inFlight, err := middleware.NewConcurrency(exports, middleware.WithLogger(logger),
		middleware.WithPolicyName("api-export-in-flight"))
	if err != nil {
		return nil, fmt.Errorf("POST /api/export: %w", err)
	}
	export := inFlight(reply("export started"))
	return map[string]http.Handler{
		"GET /api/items":   reply("items"),
		"GET /api/search":  reply("search results"),
		"POST /login":      reply("logged in"),
		"POST /api/export": export,
		"GET /api/reports": reply("reports"),
		"GET /api/me":      reply("hello, token holder"),
		"GET /api/plan":    reply("plan data"),
	}, nil
}

// identities are what the example's routes are keyed by, beyond the
// client IP: API keys (remembered by their hash only) and JWT subjects.
type identities struct {
	known   map[string]bool // hashes of every key, free and pro
	pro     map[string]bool // hashes of pro keys
	jwtFunc keyfunc.KeyFunc
}

func newIdentities(cfg options) identities {
	secret := []byte(cfg.jwtSecret)
	id := identities{known: hashedKeys(cfg.apiKeys), pro: hashedKeys(cfg.proKeys)}
	for h := range id.pro {
		id.known[h] = true
	}
	id.jwtFunc = jwtkey.Subject(func(*jwt.Token) (any, error) { return secret, nil },
		jwt.WithValidMethods([]string{"HS256"}))
	return id
}

// isKnown accepts the keys of -api-keys and -pro-keys. Unknown keys are
// refused, so nobody can make up a key to get a fresh limit.
func (id identities) isKnown(raw string) bool { return id.known[keyfunc.HashAPIKey(raw)] }

// plan returns "pro" for a pro key's requests, "" (the policy's own
// limits) for the rest.
func (id identities) plan(_ *http.Request, key string) string {
	if id.pro[strings.TrimPrefix(key, "key:")] {
		return "pro"
	}
	return ""
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

// routeDocs lists routes for GET /.
func routeDocs(infos []config.RouteInfo) []route {
	docs := make([]route, 0, len(infos))
	for _, info := range infos {
		doc := route{Method: info.Method, Path: info.Path, Algorithm: string(info.Algorithm), Key: info.Key}
		if info.Cost > 1 {
			doc.Cost = info.Cost
		}
		bucket := info.Algorithm == algorithms.TokenBucket || info.Algorithm == algorithms.LeakyBucket
		for _, l := range info.Limits {
			d := limitDoc{Rate: l.Rate, PeriodSeconds: l.Period.Seconds()}
			if bucket {
				d.Burst = l.Burst
			}
			doc.Limits = append(doc.Limits, d)
		}
		if len(info.Plans) > 0 {
			// The policy's own limits are the free plan's.
			parts := []string{"free: " + rates(info.Limits)}
			for _, name := range slices.Sorted(maps.Keys(info.Plans)) {
				parts = append(parts, name+": "+rates(info.Plans[name].Limits))
			}
			doc.Plan = strings.Join(parts, "; ")
		}
		docs = append(docs, doc)
	}
	return docs
}

// rates writes limits as "5/s and 100/min".
func rates(limits []algorithms.Limit) string {
	parts := make([]string, len(limits))
	for i, l := range limits {
		switch l.Period {
		case time.Second:
			parts[i] = fmt.Sprintf("%d/s", l.Rate)
		case time.Minute:
			parts[i] = fmt.Sprintf("%d/min", l.Rate)
		case time.Hour:
			parts[i] = fmt.Sprintf("%d/h", l.Rate)
		default:
			parts[i] = fmt.Sprintf("%d per %s", l.Rate, l.Period)
		}
	}
	return strings.Join(parts, " and ")
}
