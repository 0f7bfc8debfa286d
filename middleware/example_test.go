package middleware_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/redisstore"
)

// send makes a request to h from the client at addr and prints the status
// and two of the rate-limit headers.
func send(h http.Handler, method, path, addr string, header ...string) {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = addr
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Println(strings.TrimSpace(fmt.Sprint(w.Code, " ", strings.Join(w.Header().Values("RateLimit"), ", "), " ", w.Header().Get("Retry-After"))))
}

// The middleware on net/http's ServeMux, keyed by client IP (the default),
// with the state in process memory.
func Example() {
	store, err := memstore.New()
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(2))
	if err != nil {
		log.Fatal(err)
	}
	limit, err := middleware.New(limiter)
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.Handle("GET /search", limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "results")
	})))

	for range 3 {
		send(mux, http.MethodGet, "/search", "192.0.2.1:1234")
	}
	// Output:
	// 200 "default";r=1;t=60
	// 200 "default";r=0;t=60
	// 429 "default";r=0;t=60 60
}

// Per-route limits on chi: a limit for searches with r.With, and a limit
// on uploads, charged by the number of files, for a whole route group.
// Clients are keyed by API key where they send one, else by IP.
func Example_chi() {
	store, err := memstore.New()
	if err != nil {
		log.Fatal(err)
	}
	searches, err := algorithms.New(store, algorithms.SlidingWindowCounter, algorithms.PerMinute(100))
	if err != nil {
		log.Fatal(err)
	}
	uploads, err := algorithms.New(store, algorithms.TokenBucket, algorithms.PerHour(10))
	if err != nil {
		log.Fatal(err)
	}
	// Only issued keys: a made-up key falls through to the IP.
	issued := keyfunc.KnownAPIKey(func(raw string) bool { return raw == "k-123" })
	key := middleware.WithKeyFunc(keyfunc.FirstOf(keyfunc.APIKey("X-API-Key", issued), keyfunc.IP()))
	files := func(r *http.Request) int {
		n, err := strconv.Atoi(r.URL.Query().Get("files"))
		if err != nil {
			return 1
		}
		return n // below 1 gets 400, above the quota 413
	}

	ok := func(w http.ResponseWriter, r *http.Request) {}
	searchLimit, err := middleware.New(searches, key, middleware.WithPolicyName("search"))
	if err != nil {
		log.Fatal(err)
	}
	uploadLimit, err := middleware.New(uploads, key, middleware.WithCost(files), middleware.WithPolicyName("uploads"))
	if err != nil {
		log.Fatal(err)
	}
	r := chi.NewRouter()
	r.With(searchLimit).Get("/search", ok)
	r.Route("/uploads", func(r chi.Router) {
		r.Use(uploadLimit)
		r.Post("/", ok)
	})

	send(r, http.MethodGet, "/search", "192.0.2.1:1234")
	send(r, http.MethodPost, "/uploads/?files=8", "192.0.2.1:1234", "X-API-Key", "k-123")
	send(r, http.MethodPost, "/uploads/?files=3", "192.0.2.1:1234", "X-API-Key", "k-123")
	send(r, http.MethodPost, "/uploads/?files=50", "192.0.2.1:1234", "X-API-Key", "k-123")
	// Output:
	// 200 "search";r=99;t=120
	// 200 "uploads";r=2;t=2880
	// 429 "uploads";r=2;t=360 360
	// 413
}

// Tiers: the limiter is picked per request from the API key, known to the
// service by its hash only. Unknown keys and anonymous clients get the
// limiter given to New.
func ExampleWithLimiterFunc() {
	store, err := memstore.New()
	if err != nil {
		log.Fatal(err)
	}
	mustNew := func(l algorithms.Limit) algorithms.Limiter {
		lim, err := algorithms.New(store, algorithms.FixedWindow, l)
		if err != nil {
			log.Fatal(err)
		}
		return lim
	}
	anonymous, free, pro := mustNew(algorithms.PerMinute(1)), mustNew(algorithms.PerMinute(2)), mustNew(algorithms.PerMinute(5))
	plans := map[string]algorithms.Limiter{
		"key:" + keyfunc.HashAPIKey("free-key"): free,
		"key:" + keyfunc.HashAPIKey("pro-key"):  pro,
	}
	limit, err := middleware.New(anonymous,
		// KnownAPIKey: a made-up key is keyed by the IP, not by itself.
		middleware.WithKeyFunc(keyfunc.FirstOf(keyfunc.APIKey("X-API-Key",
			keyfunc.KnownAPIKey(func(raw string) bool { return plans["key:"+keyfunc.HashAPIKey(raw)] != nil })),
			keyfunc.IP())),
		middleware.WithLimiterFunc(func(_ *http.Request, key string) algorithms.Limiter {
			return plans[key] // nil, so New's limiter, for other keys and IPs
		}),
	)
	if err != nil {
		log.Fatal(err)
	}
	h := limit(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	send(h, http.MethodGet, "/", "192.0.2.1:1234", "X-API-Key", "free-key")
	send(h, http.MethodGet, "/", "192.0.2.1:1234", "X-API-Key", "pro-key")
	send(h, http.MethodGet, "/", "192.0.2.1:1234")
	// Output:
	// 200 "default";r=1;t=60
	// 200 "default";r=4;t=60
	// 200 "default";r=0;t=60
}

// Limits shared by every instance of a service, in Redis. The client
// honours context deadlines, so a hung Redis costs a request at most the
// middleware's timeout; while Redis is unreachable, each instance counts
// in its own memory instead.
func Example_redis() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "localhost:6379",
		ContextTimeoutEnabled: true,
	})
	redisStore, err := redisstore.New(client)
	if err != nil {
		log.Fatal(err)
	}
	shared, err := algorithms.New(redisStore, algorithms.SlidingWindowCounter, algorithms.PerMinute(600))
	if err != nil {
		log.Fatal(err)
	}
	memStore, err := memstore.New()
	if err != nil {
		log.Fatal(err)
	}
	local, err := algorithms.New(memStore, algorithms.SlidingWindowCounter, algorithms.PerMinute(600))
	if err != nil {
		log.Fatal(err)
	}
	limit, err := middleware.New(shared,
		middleware.WithTimeout(50*time.Millisecond),
		middleware.WithFallback(local),
		middleware.WithErrorPolicy(middleware.RefuseOnError), // if the fallback fails too
	)
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("/api/", limit(http.NotFoundHandler()))
}

// IPv6: a client that rotates addresses inside its /64 gains nothing, and
// one that rotates /64s inside its /48 meets the looser limit of the /48.
// The two limits differ, so an IPv4 client, keyed alike by both, is counted
// once by each. The outer /48 counts every request that reaches it, those
// the /64 then refuses too. The RateLimit field lists both limits, each
// under its policy name.
func Example_iPv6Prefixes() {
	store, err := memstore.New()
	if err != nil {
		log.Fatal(err)
	}
	perClient, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(2))
	if err != nil {
		log.Fatal(err)
	}
	perNetwork, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(4))
	if err != nil {
		log.Fatal(err)
	}
	by64, err := middleware.New(perClient, middleware.WithPolicyName("client"),
		middleware.WithKeyFunc(keyfunc.IP(keyfunc.IPv6Prefix(64))))
	if err != nil {
		log.Fatal(err)
	}
	by48, err := middleware.New(perNetwork, middleware.WithPolicyName("network"),
		middleware.WithKeyFunc(keyfunc.IP(keyfunc.IPv6Prefix(48))))
	if err != nil {
		log.Fatal(err)
	}

	r := chi.NewRouter()
	r.With(by48, by64).Get("/", func(http.ResponseWriter, *http.Request) {})

	send(r, http.MethodGet, "/", "[2001:db8:1:1::a]:1234")
	send(r, http.MethodGet, "/", "[2001:db8:1:1::b]:1234") // same /64
	send(r, http.MethodGet, "/", "[2001:db8:1:1::c]:1234") // same /64: its limit
	send(r, http.MethodGet, "/", "[2001:db8:1:2::a]:1234") // another /64, same /48
	send(r, http.MethodGet, "/", "[2001:db8:1:3::a]:1234") // the /48's limit
	send(r, http.MethodGet, "/", "[2001:db8:2:1::a]:1234") // another /48
	// Output:
	// 200 "network";r=3;t=60, "client";r=1;t=60
	// 200 "network";r=2;t=60, "client";r=0;t=60
	// 429 "network";r=1;t=60, "client";r=0;t=60 60
	// 200 "network";r=0;t=60, "client";r=1;t=60
	// 429 "network";r=0;t=60 60
	// 200 "network";r=3;t=60, "client";r=1;t=60
}

// Testing a handler's limits without sleeping: the store and the
// middleware read one ManualClock, so a test spends a minute's quota,
// checks the 429 and its Retry-After, and waits it out in no time.
func Example_manualClock() {
	clock := storetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	store, err := memstore.New(memstore.WithClock(clock.Now))
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := algorithms.New(store, algorithms.SlidingWindowLog, algorithms.PerMinute(2))
	if err != nil {
		log.Fatal(err)
	}
	limit, err := middleware.New(limiter, middleware.WithClock(clock.Now))
	if err != nil {
		log.Fatal(err)
	}
	h := limit(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	send(h, http.MethodGet, "/", "192.0.2.1:1234")
	clock.Advance(10 * time.Second)
	send(h, http.MethodGet, "/", "192.0.2.1:1234")
	send(h, http.MethodGet, "/", "192.0.2.1:1234") // 429: Retry-After 50
	clock.Advance(50 * time.Second)
	send(h, http.MethodGet, "/", "192.0.2.1:1234")
	// Output:
	// 200 "default";r=1;t=60
	// 200 "default";r=0;t=60
	// 429 "default";r=0;t=50 50
	// 200 "default";r=0;t=60
}
