package algorithms

import (
	"context"
	"errors"
	"fmt"
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
// Cluster) and decides each request with one script call, atomically, on
// the Redis server's clock, so any number of application instances share
// one limit.
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
}

// NewRedisStore returns a store that keeps state in Redis through client.
// Options it cannot use, and a nil client, make New return an error.
//
// Configure the client with MaxRetries: -1: go-redis otherwise sends a
// command again after a network error, and a script whose reply was lost
// may already have counted the request. ContextTimeoutEnabled: true lets a
// context deadline cut a call to a hung server short.
func NewRedisStore(client redis.UniversalClient, opts ...StoreOption) Store {
	cfg, err := newStoreConfig(opts)
	if client == nil && err == nil {
		err = fmt.Errorf("%w: nil Redis client", ErrInvalidOption)
	}
	return &RedisStore{client: client, cfg: cfg, err: err}
}

func (s *RedisStore) newLimiter(alg Algorithm, limits []Limit) (Limiter, error) {
	if s.err != nil {
		return nil, s.err
	}
	l := &redisLimiter{client: s.client, script: scripts[alg], alg: alg, limits: limits, prefix: s.cfg.prefix + ":{"}
	args := make([]any, 1, 1+3*len(limits))
	for _, lim := range limits {
		p := paramsOf(lim)
		l.suffixes = append(l.suffixes, "}:"+stateName(alg, lim))
		args = append(args, strconv.FormatInt(p.rate, 10), strconv.FormatInt(p.period, 10), strconv.FormatInt(p.burst, 10))
	}
	l.calls.New = func() any {
		return &redisCall{keys: make([]string, len(limits)), args: append([]any(nil), args...)}
	}
	return l, nil
}

// stateName names the state of one limit under one algorithm: the part of a
// key after the hash tag. Window algorithms ignore Burst, so it is left out.
func stateName(alg Algorithm, l Limit) string {
	p := paramsOf(l)
	name := algorithmCodes[alg] + ":" + strconv.FormatInt(p.rate, 10) + ":" + strconv.FormatInt(p.period, 10)
	if alg == TokenBucket || alg == LeakyBucket {
		name += ":" + strconv.FormatInt(p.burst, 10)
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
	calls    sync.Pool // *redisCall: keys, then cost and rate, period, burst per limit
}

// Allow implements Limiter with one EVALSHA (EVAL when Redis has lost the
// script). Redis errors are returned wrapped.
func (l *redisLimiter) Allow(ctx context.Context, key string, cost int) (Result, error) {
	if err := checkRequest(l.alg, l.limits, key, cost); err != nil {
		return Result{}, err
	}
	call := l.calls.Get().(*redisCall)
	defer l.calls.Put(call)
	tag := hashTagSafe(key)
	for i, suffix := range l.suffixes {
		call.keys[i] = l.prefix + tag + suffix
	}
	call.args[0] = cost
	reply, err := l.script.Run(ctx, l.client, call.keys, call.args...).Text()
	if err != nil {
		return Result{}, fmt.Errorf("algorithms: redis %s: %w", l.alg, err)
	}
	var f [5]int64
	if !parseReply(reply, f[:]) || f[1] < 1 || f[1] > int64(len(l.limits)) {
		return Result{}, fmt.Errorf("%w: %q", ErrUnexpectedReply, reply)
	}
	return makeResult(l.alg, l.limits, int(f[1]-1), f[0] == 1, f[2], f[3], f[4]), nil
}

// Policies implements Describer.
func (l *redisLimiter) Policies() []Policy { return policies(l.alg, l.limits) }

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
