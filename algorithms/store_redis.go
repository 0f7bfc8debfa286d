package algorithms

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
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
// Any go-redis client settings keep each decision counted once: go-redis
// sends a script call again when its reply was lost (a Client up to
// MaxRetries times, a ClusterClient up to MaxRedirects times), and the
// call, which carries an id of its own, then returns its first run's answer
// instead of deciding again. A Client with MaxRetries -1 never sends a call
// again, so its calls carry no id and Redis keeps no replies for them.
func NewRedisStore(client redis.UniversalClient, opts ...StoreOption) Store {
	cfg, err := newStoreConfig(opts)
	if isNilValue(client) && err == nil {
		err = fmt.Errorf("%w: nil Redis client", ErrInvalidOption)
	}
	s := &RedisStore{client: client, cfg: cfg, err: err}
	if err == nil {
		s.guard = newGuard(cfg, poolSize(client))
		s.guard.inline = honoursDeadlines(client)
		if cfg.redis.observer != nil {
			s.guard.dials = watchDials(client, cfg.clock)
		}
		if cc, ok := client.(*redis.ClusterClient); ok {
			s.guard.reload = func() { cc.ReloadState(context.Background()) }
		}
		s.local = NewMemoryStore(WithClock(cfg.clock))
		s.guard.denials.follow(client, cfg.prefix, cfg.clock, s.guard.logger)
	}
	return s
}

// Close ends what the store runs in the background: the subscription that
// keeps its denial cache in step with refunds and resets made through
// other stores (see DenialCacheBound), which starts when the store first
// caches a denial. It does not close the client, which the caller owns;
// closing the client ends the subscription too. The store's limiters go
// on deciding after Close, but a cached denial then answers only for
// DenialCacheBound after its request. Close always returns nil.
func (s *RedisStore) Close() error {
	if s.guard != nil {
		s.guard.denials.close()
	}
	return nil
}

// resends reports whether client may send a command again after its reply
// was lost: any client but a Client with MaxRetries -1 (which its options
// hold as 0 once the client is made; a ClusterClient retries up to
// MaxRedirects times whatever MaxRetries says).
func resends(client redis.UniversalClient) bool {
	c, ok := client.(*redis.Client)
	return !ok || c.Options().MaxRetries > 0
}

// honoursDeadlines reports whether client bounds a command by its
// context's deadline (ContextTimeoutEnabled), which a call made on a
// caller's goroutine needs.
func honoursDeadlines(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// isNilValue reports whether v is nil or holds a nil pointer (or map, func,
// ...), which would panic when used.
func isNilValue(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return r.IsNil()
	}
	return false
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

// NewLimiter implements Store.
func (s *RedisStore) NewLimiter(alg Algorithm, limits []Limit) (RateLimiter, error) {
	if s == nil || s.err == nil && s.guard == nil {
		return nil, fmt.Errorf("%w: a Redis store must come from NewRedisStore", ErrInvalidOption)
	}
	if s.err != nil {
		return nil, s.err
	}
	shares, twinIndex := twinLimits(alg, limits, s.cfg.redis.instances)
	twin, err := New(s.local, alg, shares...)
	if err != nil {
		return nil, fmt.Errorf("%w: with WithInstances(%d) the local limits: %w", ErrInvalidOption, s.cfg.redis.instances, err)
	}
	l := &redisLimiter{client: s.client, script: scripts[alg], alg: alg, limits: limits, prefix: s.cfg.prefix + ":{",
		channel: denialsChannel(s.cfg.prefix), guard: s.guard, twin: twin.(*memoryLimiter), twinIndex: twinIndex,
		instances: s.cfg.redis.instances, salt: rand.Uint64()}
	args := make([]any, 1, 2+4*len(limits))
	for _, lim := range limits {
		p := paramsFor(alg, lim)
		l.suffixes = append(l.suffixes, "}:"+stateName(alg, lim))
		args = append(args, strconv.FormatInt(p.rate, 10), strconv.FormatInt(p.period, 10),
			strconv.FormatInt(p.burst, 10), strconv.FormatInt(p.unit, 10))
	}
	l.limitArgs = args[1:]
	// A deciding call has one key and one argument more: its reply's (see
	// onceTTL).
	l.onceTTL = strconv.FormatInt(onceTTL(s.cfg.redis.timeout).Milliseconds(), 10)
	l.once = resends(s.client)
	args = append(args, l.onceTTL)
	l.calls.New = func() any {
		return &redisCall{keys: make([]string, len(limits)+1), args: append([]any(nil), args...)}
	}
	return l, nil
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
	channel  string    // the store's announcements (denialsChannel)
	suffixes []string  // "}:<state name>", one per limit
	calls    sync.Pool // *redisCall: keys, then costs and rate, period, burst, unit per limit
	// limitArgs are the script's arguments after the costs: rate, period,
	// burst and unit per limit; onceTTL, after them in a deciding call, how long
	// (ms) the call's reply is kept.
	limitArgs []any
	onceTTL   string
	once      bool // deciding calls carry an id: the client may send them again
	guard     *guard
	twin      *memoryLimiter // the same limits in memory, for decisions Redis cannot make
	twinIndex []int          // per twin limit, the position in limits of the one it answers for
	instances int            // WithInstances: the twin holds 1/instances of the limits
	salt      uint64         // tells this limiter's keys from another's in lastSaid
}

// Policies implements RateLimiter.
func (l *redisLimiter) Policies() []Policy { return policies(l.alg, l.limits) }

// decide runs the script once for the requests of costs on key, in order,
// and returns their Results, in dst if it has room. Redis errors are
// returned wrapped.
func (l *redisLimiter) decide(ctx context.Context, key string, costs []int, dst []Result) ([]Result, error) {
	res, _, err := l.runInto(ctx, key, costList(costs), len(costs), true, dst)
	return res, err
}

// decideWithID is decide, also returning the call's id (0 for none).
func (l *redisLimiter) decideWithID(ctx context.Context, key string, costs []int, dst []Result) ([]Result, uint64, error) {
	return l.runInto(ctx, key, costList(costs), len(costs), true, dst)
}

// run runs the script once with the list of costs list, n requests, on
// key. A call that decides carries an id, so that it counts once however
// often go-redis sends it; a peek needs none.
func (l *redisLimiter) run(ctx context.Context, key, list string, n int, deciding bool) ([]Result, error) {
	res, _, err := l.runInto(ctx, key, list, n, deciding, nil)
	return res, err
}

// runInto is run with the Results in dst if it has room, and the call's id.
// In a migrating Cluster slot it sends no id, but in a refund (see
// redis_migrate.go).
func (l *redisLimiter) runInto(ctx context.Context, key, list string, n int, deciding bool, dst []Result) ([]Result, uint64, error) {
	call := l.calls.Get().(*redisCall)
	defer l.calls.Put(call)
	keys, args := call.keys, call.args
	g := l.guard
	refund := strings.HasPrefix(list, "r")
	var id uint64
	if deciding && l.once && (refund || !g.moving.Holds(hashTagSafe(key), g.clock)) {
		id = g.ids.id()
		l.keysOf(key, keys, id)
	} else {
		keys, args = keys[:len(l.limits)], args[:len(args)-1]
		l.keysOf(key, keys, 0)
	}
	args[0] = list
	reply, err := l.script.Run(ctx, l.client, keys, args...).Text()
	if err != nil && id != 0 && !refund && g.moving.Learn(hashTagSafe(key), err, g.clock()) {
		// Not run: the key that kept it from running goes.
		id = 0
		reply, err = l.script.Run(ctx, l.client, keys[:len(l.limits)], args[:len(args)-1]...).Text()
	}
	if err != nil {
		return nil, id, scriptError(l.alg, err)
	}
	res, err := l.parse(reply, n, dst)
	return res, id, err
}

// parse reads the script's reply for n requests into dst, or a new slice
// when dst is too short (a job's buffer spares one allocation per key).
func (l *redisLimiter) parse(reply string, n int, dst []Result) ([]Result, error) {
	var small [20]int64 // a reply of up to 4 requests, off the heap
	var f []int64
	if 5*n <= len(small) {
		f = small[:5*n]
	} else {
		f = make([]int64, 5*n)
	}
	if !parseReply(reply, f) {
		return nil, fmt.Errorf("%w: %q", ErrUnexpectedReply, reply)
	}
	res := dst[:0]
	if cap(res) < n {
		res = make([]Result, n)
	}
	res = res[:n]
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
// copies them into its command before Run returns. Keys are the limits'
// then the call's reply's; args the costs, three per limit, then the
// reply's TTL in milliseconds.
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

// onceKey returns the key that keeps the reply of call id on key's slot.
func (l *redisLimiter) onceKey(key string, id uint64) string {
	var idText [32]byte
	return l.prefix + hashTagSafe(key) + onceInfix + string(l.guard.ids.appendID(idText[:0], id))
}

// keysOf fills keys with the Redis keys of key's state, one per limit,
// and, when keys has room for one more, the key of call id's reply. They
// are cut from one string: one allocation however many there are.
func (l *redisLimiter) keysOf(key string, keys []string, id uint64) {
	tag := hashTagSafe(key)
	once := len(keys) > len(l.suffixes)
	var idText [32]byte
	size := len(keys) * (len(l.prefix) + len(tag))
	for _, suffix := range l.suffixes {
		size += len(suffix)
	}
	var text []byte
	if once {
		text = l.guard.ids.appendID(idText[:0], id)
		size += len(onceInfix) + len(text)
	}
	var b strings.Builder
	b.Grow(size)
	var endBuf [8]int
	ends := endBuf[:0]
	for _, suffix := range l.suffixes {
		b.WriteString(l.prefix)
		b.WriteString(tag)
		b.WriteString(suffix)
		ends = append(ends, b.Len())
	}
	if once {
		b.WriteString(l.prefix)
		b.WriteString(tag)
		b.WriteString(onceInfix)
		b.Write(text)
		ends = append(ends, b.Len())
	}
	s, start := b.String(), 0
	for i, end := range ends {
		keys[i] = s[start:end]
		start = end
	}
}
