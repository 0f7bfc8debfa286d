package algorithms

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/lua"
)

// ErrUnexpectedReply reports a reply from Redis that the scripts never send,
// such as a script of another version under the same SHA.
var ErrUnexpectedReply = errors.New("algorithms: unexpected reply from Redis")

var scripts = map[Algorithm]*redis.Script{
	FixedWindow:          redis.NewScript(lua.FixedWindow),
	SlidingWindowLog:     redis.NewScript(lua.SlidingWindowLog),
	SlidingWindowCounter: redis.NewScript(lua.SlidingWindowCounter),
	TokenBucket:          redis.NewScript(lua.TokenBucket),
	LeakyBucket:          redis.NewScript(lua.LeakyBucket),
}

// RedisStore keeps rate-limit state in Redis (a single server, Sentinel or
// Cluster) and decides each request with a script call, atomically, on
// the Redis server's clock, so any number of application instances share
// one limit.
//
// Its limiters never turn the limit off because Redis is slow, away or
// overwhelmed: each decision has a deadline (WithTimeout) that holds
// whatever the go-redis client's settings, and a decision Redis cannot make
// in time is made by the FailureMode, by default in process memory with the
// same limits. Concurrent requests for one key share one script call; a
// denial is remembered until its RetryAfter (WithDenialCache); a breaker
// stops asking Redis when it looks unhealthy (WithBreaker). Result.Decider
// says which of these decided.
//
// Keys are "<prefix>:{<key>}:<algorithm>:<rate>:<period µs>" with
// ":<burst>" added for the bucket algorithms. The braces make the caller's
// key the hash tag, so all keys of one decision lie in one Cluster slot;
// '{', '}' and '%' in the caller's key are percent-escaped so the tag is
// always the whole key.
type RedisStore struct {
	client redis.UniversalClient
	cfg    storeConfig
	err    error
	guard  *guard
	local  Store // the local twins' store
}

// NewRedisStore returns a store that keeps state in Redis through client.
// Options it cannot use, and a nil client, make New return an error.
//
// Configure the client with MaxRetries: -1: go-redis otherwise sends a
// command again after a network error, and a script whose reply was lost
// may already have counted the request.
func NewRedisStore(client redis.UniversalClient, opts ...StoreOption) Store {
	cfg, err := newStoreConfig(opts)
	if client == nil && err == nil {
		err = fmt.Errorf("%w: nil Redis client", ErrInvalidOption)
	}
	s := &RedisStore{client: client, cfg: cfg, err: err}
	if err == nil {
		s.guard = newGuard(cfg, poolSize(client))
		if cc, ok := client.(*redis.ClusterClient); ok {
			s.guard.reload = func() { cc.ReloadState(context.Background()) }
		}
		s.local = NewMemoryStore(WithClock(cfg.clock))
	}
	return s
}

// poolSize returns the client's connection pool size, the default bound on
// calls in flight.
func poolSize(client redis.UniversalClient) int {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().PoolSize
	case *redis.ClusterClient:
		return c.Options().PoolSize
	}
	return 10 * runtime.GOMAXPROCS(0)
}

func (s *RedisStore) newLimiter(alg Algorithm, limits []Limit) (RateLimiter, error) {
	if s.err != nil {
		return nil, s.err
	}
	twin, err := New(s.local, alg, shareOf(limits, s.cfg.redis.instances)...)
	if err != nil {
		return nil, fmt.Errorf("%w: with WithInstances(%d) the local limits: %w", ErrInvalidOption, s.cfg.redis.instances, err)
	}
	l := &redisLimiter{client: s.client, script: scripts[alg], alg: alg, limits: limits, prefix: s.cfg.prefix + ":{",
		guard: s.guard, twin: twin}
	args := make([]any, 1, 1+4*len(limits))
	for _, lim := range limits {
		p := paramsFor(alg, lim)
		l.suffixes = append(l.suffixes, "}:"+stateName(alg, lim))
		args = append(args, strconv.FormatInt(p.rate, 10), strconv.FormatInt(p.period, 10),
			strconv.FormatInt(p.burst, 10), strconv.FormatInt(p.unit, 10))
	}
	l.calls.New = func() any {
		return &redisCall{keys: make([]string, len(limits)), args: append([]any(nil), args...)}
	}
	return l, nil
}

// shareOf returns limits with Rate and Burst divided by n, rounded down and
// at least 1: one instance's share, for the local twin.
func shareOf(limits []Limit, n int) []Limit {
	out := make([]Limit, len(limits))
	for i, l := range limits {
		out[i] = l
		if n > 1 {
			out[i].Rate = max(1, l.Rate/n)
			if l.Burst > 0 {
				out[i].Burst = max(1, l.Burst/n)
			}
		}
	}
	return out
}

// stateName names the state of one limit under one algorithm: the part of a
// key after the hash tag. Window algorithms ignore Burst, so it is left out.
func stateName(alg Algorithm, l Limit) string {
	name := algorithmCodes[alg] + ":" + strconv.Itoa(l.Rate) + ":" + strconv.FormatInt(l.Period.Microseconds(), 10)
	if alg == TokenBucket || alg == LeakyBucket {
		name += ":" + strconv.Itoa(l.burst())
	}
	return name
}

type redisLimiter struct {
	client   redis.UniversalClient
	script   *redis.Script
	alg      Algorithm
	limits   []Limit
	prefix   string    // "<prefix>:{"
	suffixes []string  // "}:<state name>", one per limit
	calls    sync.Pool // *redisCall: keys, then costs and rate, period, burst, unit per limit
	guard    *guard
	twin     Limiter // the same limits in memory, for decisions Redis cannot make
}

// Policies implements Describer.
func (l *redisLimiter) Policies() []Policy { return policies(l.alg, l.limits) }

// decide runs the script once for the requests of costs on key, in order,
// and returns their Results. Redis errors are returned wrapped.
func (l *redisLimiter) decide(ctx context.Context, key string, costs []int) ([]Result, error) {
	return l.run(ctx, key, costList(costs), len(costs))
}

// run runs the script once with the list of costs list, n requests, on
// key.
func (l *redisLimiter) run(ctx context.Context, key, list string, n int) ([]Result, error) {
	call := l.calls.Get().(*redisCall)
	defer l.calls.Put(call)
	l.keysOf(key, call.keys)
	call.args[0] = list
	reply, err := l.script.Run(ctx, l.client, call.keys, call.args...).Text()
	if err != nil {
		return nil, scriptError(l.alg, err)
	}
	return l.parse(reply, n)
}

// parse reads the script's reply for n requests.
func (l *redisLimiter) parse(reply string, n int) ([]Result, error) {
	f := make([]int64, 5*n)
	if !parseReply(reply, f) {
		return nil, fmt.Errorf("%w: %q", ErrUnexpectedReply, reply)
	}
	res := make([]Result, n)
	for i := range res {
		v := f[5*i : 5*i+5]
		if v[1] < 1 || v[1] > int64(len(l.limits)) {
			return nil, fmt.Errorf("%w: %q", ErrUnexpectedReply, reply)
		}
		res[i] = makeResult(l.alg, l.limits, int(v[1]-1), v[0] == 1, v[2], v[3], v[4])
	}
	return res, nil
}

// costList is the script's list of costs: "1" for the common single request
// of cost 1, without an allocation.
func costList(costs []int) string {
	if len(costs) == 1 && costs[0] == 1 {
		return "1"
	}
	b := make([]byte, 0, 4*len(costs))
	for i, c := range costs {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, int64(c), 10)
	}
	return string(b)
}

// hashTagSafe escapes '{', '}' and '%' in key, so that the whole key, and
// not a piece of it up to a '}', is the Cluster hash tag: keys such as
// "route:/users/{id}|ip:192.0.2.1" would otherwise put every client of a
// route in one slot. Escaping '%' too keeps distinct keys distinct.
func hashTagSafe(key string) string {
	if !strings.ContainsAny(key, "{}%") {
		return key
	}
	return tagEscaper.Replace(key)
}

var tagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// redisCall holds the slices of one script call, reused across calls: go-redis
// copies them into its command before Run returns.
type redisCall struct {
	keys []string
	args []any
}

// parseReply reads len(f) non-negative integers separated by single spaces.
func parseReply(s string, f []int64) bool {
	i := 0
	for n := range f {
		start := i
		var v int64
		for i < len(s) && s[i] >= '0' && s[i] <= '9' && i-start < 18 {
			v = v*10 + int64(s[i]-'0')
			i++
		}
		if i == start {
			return false
		}
		f[n] = v
		if n < len(f)-1 {
			if i >= len(s) || s[i] != ' ' {
				return false
			}
			i++
		}
	}
	return i == len(s)
}

// keysOf fills keys with the Redis keys of key's state, one per limit.
func (l *redisLimiter) keysOf(key string, keys []string) {
	tag := hashTagSafe(key)
	for i, suffix := range l.suffixes {
		keys[i] = l.prefix + tag + suffix
	}
}
