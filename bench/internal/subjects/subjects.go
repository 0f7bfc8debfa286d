// Package subjects builds the rate-limiting middlewares that the comparison
// runs, redlimit's and its peers', each around the same handler, at the
// same limit, keyed by the client's IP address.
package subjects

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Kind says where a subject keeps its counts.
type Kind int

const (
	// None is the bare handler, with no limiter.
	None Kind = iota
	// Memory subjects count in this process.
	Memory
	// Redis subjects count in the shared redis-server.
	Redis
)

// String returns "none", "memory" or "redis".
func (k Kind) String() string {
	switch k {
	case Memory:
		return "memory"
	case Redis:
		return "redis"
	}
	return "none"
}

// Env is what a subject is built with.
type Env struct {
	// RedisAddr is the redis-server's address, for the Redis subjects.
	RedisAddr string
	// PoolSize is the go-redis connection pool size of every Redis subject.
	PoolSize int
	// Rate requests per Period is the limit of every subject (the sliding
	// window log, whose rate is capped, takes the lower of Rate and its cap).
	Rate   int
	Period time.Duration
	// Forwarded keys requests by the last X-Forwarded-For address, as if
	// behind a trusted proxy on loopback, instead of by RemoteAddr: for the
	// real-HTTP runs, where every connection comes from 127.0.0.1.
	Forwarded bool
}

// Instance is a built subject.
type Instance struct {
	// Handler is the middleware around the handler.
	Handler http.Handler
	// Close releases what Build made (Redis clients).
	Close func()
	// Stand-ins counts redlimit's decisions that were not made by the
	// store itself (its local twin, fail-open or fail-closed), which would
	// make a measurement of the Redis store dishonest; nil for the others.
	StandIns func() int64
	// Cached counts redlimit's denials repeated from its local denial
	// cache without asking Redis; nil for the others.
	Cached func() int64
	// Commands counts the commands the subject's Redis client has sent
	// (see commandCounter); nil for the memory subjects.
	Commands func() int64
}

// Subject is one middleware under comparison.
type Subject struct {
	// Name is the row's label.
	Name string
	// Kind is where it keeps its counts.
	Kind Kind
	// Peer is true for the other libraries, false for redlimit, bare and
	// the floor.
	Peer bool
	// Floor is true for the floor, which decides nothing and passes every
	// request: a baseline of the Redis-backed ones, as bare is of all.
	Floor bool
	// Build makes the middleware around next.
	Build func(env Env, next http.Handler) (*Instance, error)
}

// Trivial is the handler under every middleware: as little as a handler
// does.
var Trivial http.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusNoContent)
})

// Bare is the handler with no middleware.
var Bare = Subject{Name: "bare handler (no limiter)", Kind: None, Build: func(_ Env, next http.Handler) (*Instance, error) {
	return &Instance{Handler: next, Close: func() {}}, nil
}}

// All returns every subject: the bare handler, the memory ones, then the
// Redis ones, each kind's floor before redlimit's rows.
func All() []Subject {
	out := []Subject{Bare}
	out = append(out, MemoryPeers()...)
	out = append(out, HeadersFloor())
	out = append(out, RedlimitMemory()...)
	out = append(out, Floor())
	out = append(out, RedisPeers()...)
	out = append(out, RedlimitRedis()...)
	return out
}

// Tenants returns the subjects of the per-tenant section: the bare
// handler; redlimit on the memory store, on the Redis store (exact) and on
// a leased Redis store, for each of LeasedAlgorithms; and the Redis peers
// the leased rows' targets are set against, go-redis/redis_rate and
// ulule/limiter's Redis store.
func Tenants() []Subject {
	out := []Subject{Bare}
	algs := LeasedAlgorithms()
	for _, alg := range algs {
		out = append(out, RedlimitSubject(alg, memoryStore, ""))
	}
	for _, p := range RedisPeers() {
		if p.Name == RedisRateName || p.Name == UluleRedisName {
			out = append(out, p)
		}
	}
	for _, alg := range algs {
		out = append(out, RedlimitRedisSubject(alg, ""))
	}
	return append(out, RedlimitLeased()...)
}

// newClient returns the go-redis client that every Redis subject uses: the
// same pool size, no retries (a lost reply re-sent could count one request
// twice), and commands bounded by their context's deadline, as redlimit's
// README recommends (the peers pass contexts without deadlines, so it
// changes nothing for them); and a hook that counts the commands it sends.
func newClient(env Env) (*redis.Client, *commandCounter) {
	c := redis.NewClient(&redis.Options{Addr: env.RedisAddr, PoolSize: env.PoolSize, MaxRetries: -1, ContextTimeoutEnabled: true})
	counter := &commandCounter{}
	c.AddHook(counter)
	return c, counter
}

// clientIP returns the client's address as the peers' own middlewares here
// key it: RemoteAddr's host, or with env.Forwarded the last address in
// X-Forwarded-For.
func clientIP(env Env, r *http.Request) (string, error) {
	if env.Forwarded {
		xff := r.Header.Get("X-Forwarded-For")
		if i := strings.LastIndexByte(xff, ','); i >= 0 {
			xff = xff[i+1:]
		}
		if xff = strings.TrimSpace(xff); xff != "" {
			return xff, nil
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return "", fmt.Errorf("client address %q: %w", r.RemoteAddr, err)
	}
	return host, nil
}

// retryAfterSeconds renders a wait as Retry-After's whole seconds, rounded
// up.
func retryAfterSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return fmt.Sprint(max(s, 1))
}
