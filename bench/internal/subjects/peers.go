package subjects

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/httprate"
	httprateredis "github.com/go-chi/httprate-redis"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ululememory "github.com/ulule/limiter/v3/drivers/store/memory"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"
	"golang.org/x/time/rate"
)

// The rows of the peers that the comparison's targets are set against.
const (
	HTTPRateMemoryName = "go-chi/httprate, memory"
	RedisRateName      = "go-redis/redis_rate v10"
	UluleRedisName     = "ulule/limiter, redis store"
)

// MemoryPeers returns the other libraries' in-memory middlewares.
func MemoryPeers() []Subject {
	return []Subject{
		{Name: "x/time/rate, keyed sync.Map", Kind: Memory, Peer: true, Build: buildXRate},
		{Name: HTTPRateMemoryName, Kind: Memory, Peer: true, Build: buildHTTPRateMemory},
		{Name: "ulule/limiter, memory store", Kind: Memory, Peer: true, Build: buildUluleMemory},
	}
}

// RedisPeers returns the other libraries' Redis-backed middlewares.
func RedisPeers() []Subject {
	return []Subject{
		{Name: "go-chi/httprate + httprate-redis", Kind: Redis, Peer: true, Build: buildHTTPRateRedis},
		{Name: RedisRateName, Kind: Redis, Peer: true, Build: buildRedisRate},
		{Name: UluleRedisName, Kind: Redis, Peer: true, Build: buildUluleRedis},
	}
}

// FloorName is the floor's row label.
const FloorName = "floor: one GET"

// Floor is the floor of the Redis-backed middlewares: per request, one
// go-redis GET of the client's key (floorPrefix and the client IP), on a
// client like theirs, whose value it ignores before it passes the request
// on. It decides nothing: it is what one round trip per request costs.
func Floor() Subject {
	return Subject{Name: FloorName, Kind: Redis, Floor: true, Build: buildFloor}
}

// floorPrefix starts the floor's keys, which it only ever reads.
const floorPrefix = "floor:"

// buildFloor answers 503 when the GET fails (not for a missing key, the
// usual reply), so that a Redis failure shows as unexpected statuses
// rather than as speed.
func buildFloor(env Env, next http.Handler) (*Instance, error) {
	client, cmds := newClient(env)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, err := clientIP(env, r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := client.Get(r.Context(), floorPrefix+ip).Err(); err != nil && !errors.Is(err, redis.Nil) {
			http.Error(w, fmt.Sprintf("floor: %v", err), http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
	return &Instance{Handler: h, Close: func() { _ = client.Close() }, Commands: cmds.count}, nil
}

// buildXRate is the usual memory baseline: one *rate.Limiter per client in
// a sync.Map, a token bucket of Rate per Period with a burst of Rate. It
// sets no headers (rate.Limiter has no cheap "remaining" to report).
func buildXRate(env Env, next http.Handler) (*Instance, error) {
	var limiters sync.Map
	every := rate.Limit(float64(env.Rate) / env.Period.Seconds())
	retry := retryAfterSeconds(env.Period / time.Duration(env.Rate))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := clientIP(env, r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		v, ok := limiters.Load(key)
		if !ok {
			v, _ = limiters.LoadOrStore(key, rate.NewLimiter(every, env.Rate))
		}
		if !v.(*rate.Limiter).Allow() {
			w.Header().Set("Retry-After", retry)
			http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
	return &Instance{Handler: h, Close: func() {}}, nil
}

// httprateKey keys httprate by client IP, canonicalised as httprate's own
// key functions do.
func httprateKey(env Env) httprate.KeyFunc {
	return func(r *http.Request) (string, error) {
		ip, err := clientIP(env, r)
		if err != nil {
			return "", err
		}
		return httprate.CanonicalizeIP(ip), nil
	}
}

func buildHTTPRateMemory(env Env, next http.Handler) (*Instance, error) {
	h := httprate.LimitBy(env.Rate, env.Period, httprateKey(env))(next)
	return &Instance{Handler: h, Close: func() {}}, nil
}

// buildHTTPRateRedis uses httprate-redis's counter with its local fallback
// off, so that a Redis failure shows as an error status rather than as a
// silent switch to memory.
func buildHTTPRateRedis(env Env, next http.Handler) (*Instance, error) {
	client, cmds := newClient(env)
	rl := httprate.NewRateLimiter(env.Rate, env.Period,
		httprate.WithKeyFuncs(httprateKey(env)),
		httprateredis.WithRedisLimitCounter(&httprateredis.Config{Client: client, FallbackDisabled: true}))
	return &Instance{Handler: rl.Handler(next), Close: func() { _ = client.Close() }, Commands: cmds.count}, nil
}

// buildRedisRate wraps redis_rate, which has no middleware of its own, in
// one of the usual shape: key by client IP, X-RateLimit-Limit, -Remaining
// and -Reset headers, 429 with Retry-After when denied, 503 on error.
func buildRedisRate(env Env, next http.Handler) (*Instance, error) {
	client, cmds := newClient(env)
	lim := redis_rate.NewLimiter(client)
	limit := redis_rate.Limit{Rate: env.Rate, Burst: env.Rate, Period: env.Period}
	limitText := strconv.Itoa(env.Rate)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := clientIP(env, r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		res, err := lim.Allow(r.Context(), key, limit)
		if err != nil {
			http.Error(w, fmt.Sprintf("rate limiter: %v", err), http.StatusServiceUnavailable)
			return
		}
		hd := w.Header()
		hd.Set("X-RateLimit-Limit", limitText)
		hd.Set("X-RateLimit-Remaining", strconv.Itoa(res.Remaining))
		hd.Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(res.ResetAfter).Unix(), 10))
		if res.Allowed == 0 {
			hd.Set("Retry-After", retryAfterSeconds(res.RetryAfter))
			http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
	return &Instance{Handler: h, Close: func() { _ = client.Close() }, Commands: cmds.count}, nil
}

// ululeRate is ulule's fixed-window quota.
func ululeRate(env Env) limiter.Rate {
	return limiter.Rate{Period: env.Period, Limit: int64(env.Rate)}
}

// ululeOptions trusts X-Forwarded-For only in the real-HTTP runs.
func ululeOptions(env Env) []limiter.Option {
	if env.Forwarded {
		return []limiter.Option{limiter.WithTrustForwardHeader(true)}
	}
	return nil
}

func buildUluleMemory(env Env, next http.Handler) (*Instance, error) {
	lim := limiter.New(ululememory.NewStore(), ululeRate(env), ululeOptions(env)...)
	return &Instance{Handler: stdlib.NewMiddleware(lim).Handler(next), Close: func() {}}, nil
}

func buildUluleRedis(env Env, next http.Handler) (*Instance, error) {
	client, cmds := newClient(env)
	store, err := ululeredis.NewStore(client)
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("ulule/limiter redis store: %w", err)
	}
	lim := limiter.New(store, ululeRate(env), ululeOptions(env)...)
	return &Instance{Handler: stdlib.NewMiddleware(lim).Handler(next), Close: func() { _ = client.Close() }, Commands: cmds.count}, nil
}
