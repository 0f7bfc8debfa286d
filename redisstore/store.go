package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
	"github.com/redlimit/redlimit/internal/scripts"
	"github.com/redlimit/redlimit/memstore"
)

// ErrUnexpectedReply reports a reply from Redis that the scripts never send,
// such as a script of another version under the same SHA.
var ErrUnexpectedReply = errors.New("redisstore: unexpected reply from Redis")

// algorithmScripts are the algorithms' complete scripts, their driver
// taking any call of one or more limits.
var algorithmScripts = map[algorithms.Algorithm]*redis.Script{
	algorithms.FixedWindow:          redis.NewScript(scripts.FixedWindow),
	algorithms.SlidingWindowLog:     redis.NewScript(scripts.SlidingWindowLog),
	algorithms.SlidingWindowCounter: redis.NewScript(scripts.SlidingWindowCounter),
	algorithms.TokenBucket:          redis.NewScript(scripts.TokenBucket),
	algorithms.LeakyBucket:          redis.NewScript(scripts.LeakyBucket),
}

// Store keeps rate-limit state in Redis (a single server, Sentinel or
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
type Store struct {
	client redis.UniversalClient
	cfg    config
	guard  *guard
	local  *memstore.Store // the local twins' store
	leases leaseWorker     // WithLeases: renewals and returns (see lease_worker.go)
}

// New returns a store that keeps state in Redis through client, or an
// error wrapping algorithms.ErrInvalidOption for an option it cannot use
// (a nil one among them) or a nil client; it returns no store then.
//
// New adds a hook to client (a *redis.Client, Sentinel's included, or the
// node clients a *redis.ClusterClient makes from then on; not to other
// clients) that watches its dials and nothing else: a dial that Redis
// refuses (a stopped server) opens the breaker at once and ends every
// decision's wait, so that a dead Redis costs each decision well under a
// millisecond, from the first (see dial_watch.go). go-redis cannot remove
// a hook: after Close it stays on the client, inert (see dial_hook.go).
//
// Any go-redis client settings keep each decision counted once: go-redis
// sends a script call again when its reply was lost (a Client up to
// MaxRetries times, a ClusterClient up to MaxRedirects times), and the
// call, which carries an id of its own, then returns its first run's answer
// instead of deciding again. A Client with MaxRetries -1 never sends a call
// again, so its calls carry no id and Redis keeps no replies for them.
//
// New asks Redis for its maxmemory-policy, waiting for the answer at most
// the store's timeout (WithTimeout), and asks again every minute on a
// goroutine of the store's: while Redis may evict the store's keys, its
// limiters decide by the FailureMode (see CheckEvictionPolicy and
// WithEvictionAllowed). The store's other goroutines start as they are
// needed; Close stops them all.
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if isNilValue(client) {
		return nil, fmt.Errorf("%w: nil Redis client", algorithms.ErrInvalidOption)
	}
	local, err := memstore.New(memstore.WithClock(cfg.clock))
	if err != nil {
		return nil, err
	}
	s := &Store{client: client, cfg: cfg, local: local}
	g := newGuard(cfg, poolSize(client))
	s.guard = g
	g.inline = honoursDeadlines(client)
	g.releases = newReleaseLine(client, onceTTL(cfg.redis.timeout), g.callTimeout(), g.crew)
	g.dials = watchDials(client, cfg.clock, g.refused)
	if cc, ok := client.(*redis.ClusterClient); ok {
		g.reload = func() { cc.ReloadState(context.Background()) }
	}
	g.batcher.debtors = newDebtors(client, cfg.prefix, g.ids.prefix, min(g.callTimeout(), max(2*g.timeout, 200*time.Millisecond)))
	g.denials.follow(client, cfg.prefix, cfg.clock, g.logger, g.crew)
	if !cfg.redis.evictionAllowed {
		cut := g.wheel.cutOff() // before the watch dials: a refusal ends the wait
		g.evict = watchEviction(client, g.logger, cfg.redis.mode, g.crew)
		g.evict.await(cfg.redis.timeout, cut)
	}
	return s, nil
}

// NewLimiter implements Store.
func (s *Store) NewLimiter(alg algorithms.Algorithm, limits []algorithms.Limit) (algorithms.RateLimiter, error) {
	if s == nil || s.guard == nil {
		return nil, fmt.Errorf("%w: a Redis store must come from New", algorithms.ErrInvalidOption)
	}
	shares, twinIndex := twinLimits(alg, limits, s.cfg.redis.instances)
	twin, err := algorithms.New(s.local, alg, shares...)
	if err != nil {
		return nil, fmt.Errorf("%w: with WithInstances(%d) the local limits: %w", algorithms.ErrInvalidOption, s.cfg.redis.instances, err)
	}
	l := &redisLimiter{client: s.client, script: algorithmScripts[alg], alg: alg, limits: limits, prefix: s.cfg.prefix + ":{",
		channel: denialsChannel(s.cfg.prefix), guard: s.guard, twin: twin, twinLimits: shares, twinIndex: twinIndex,
		instances: s.cfg.redis.instances, salt: rand.Uint64(), saidSpan: saidSpanOf(alg, limits)}
	for _, lim := range shares {
		l.twinMost = max(l.twinMost, ratemath.QuotaOf(alg, lim))
	}
	args := make([]any, 1, 2+4*len(limits))
	for _, lim := range limits {
		p := ratemath.ParamsFor(alg, lim)
		l.suffixes = append(l.suffixes, "}:"+ratemath.StateName(alg, lim))
		args = append(args, strconv.FormatInt(p.Rate, 10), strconv.FormatInt(p.Period, 10),
			strconv.FormatInt(p.Burst, 10), strconv.FormatInt(p.Unit, 10))
	}
	l.limitArgs = args[1:]
	if len(limits) == 1 {
		p := ratemath.ParamsFor(alg, limits[0])
		l.scriptOne = redis.NewScript(scripts.OneRequest(string(alg), p.Rate, p.Period, p.Burst, p.Unit))
		l.scriptBatch = redis.NewScript(scripts.Batch(string(alg), p.Rate, p.Period, p.Burst, p.Unit))
	}
	// A deciding call has one key and one argument more: its reply's (see
	// onceTTL).
	l.onceTTL = strconv.FormatInt(onceTTL(s.cfg.redis.timeout).Milliseconds(), 10)
	l.once = resends(s.client)
	l.alone.New = func() any { return new(scriptCall) }
	if ll := s.leased(l); ll != nil { // WithLeases (see lease_limiter.go)
		return ll, nil
	}
	return l, nil
}

type redisLimiter struct {
	client redis.UniversalClient
	script *redis.Script
	// scriptBatch, for a limiter of one limit, decides the plain costs of
	// a flush's call of several keys or requests, the limit written into
	// it; its arguments are the costs and the kept reply's lifetime.
	scriptBatch *redis.Script
	// scriptOne, for a limiter of one limit, decides one request of a
	// plain cost, the limit written into it; its arguments are the cost
	// and the kept reply's lifetime (see scriptFor).
	scriptOne *redis.Script
	alg       algorithms.Algorithm
	limits    []algorithms.Limit
	prefix    string    // "<prefix>:{"
	channel   string    // the store's announcements (denialsChannel)
	suffixes  []string  // "}:<state name>", one per limit
	alone     sync.Pool // *scriptCall: a call alone's (callAlone), its buffers reused
	// limitArgs are the script's arguments after the costs: rate, period,
	// burst and unit per limit; onceTTL, after them in a deciding call, how long
	// (ms) the call's reply is kept.
	limitArgs  []any
	onceTTL    string
	once       bool // deciding calls carry an id: the client may send them again
	guard      *guard
	twin       algorithms.RateLimiter // the same limits in memory, for decisions Redis cannot make
	twinLimits []algorithms.Limit     // the twin's limits
	twinIndex  []int                  // per twin limit, the position in limits of the one it answers for
	instances  int                    // WithInstances: the twin holds 1/instances of the limits
	salt       uint64                 // tells this limiter's keys from another's in lastSaid
	saidSpan   time.Duration          // the longest one of Redis's answers can matter (see lastSaid)
	twinMost   int                    // the twin's largest quota
}

// Policies implements RateLimiter.
func (l *redisLimiter) Policies() []algorithms.Policy { return ratemath.PoliciesOf(l.alg, l.limits) }

// run sends the requests of list (the driver's mini-language: a peek
// "p1", a reservation, a charge, a refund) on key in a call of its own,
// and returns its Result and the call's id. A call that decides carries
// an id, so that it counts once however often go-redis sends it; a peek
// needs none.
func (l *redisLimiter) run(ctx context.Context, key, list string, deciding bool) ([]algorithms.Result, uint64, error) {
	j := &job{l: l, key: key, list: list}
	l.callAlone(ctx, j, deciding)
	return j.results, j.id, j.err
}

// callAlone sends j in a script call of its own, laid out and sent as the
// batches' calls are (assemble, runCalls: the lost script sent again, a
// slot in migration handled once), and leaves its answers, id and error
// in j. A refund keeps its exactly-once key (see migrate.go). It returns
// runCalls's error: nil when Redis answered, even with an error reply.
func (l *redisLimiter) callAlone(ctx context.Context, j *job, deciding bool) error {
	c := l.alone.Get().(*scriptCall)
	c.l, c.keepOnce = l, strings.HasPrefix(j.list, "r")
	c.jobBuf[0] = j
	c.jobs = c.jobBuf[:]
	c.assemble(deciding && l.once)
	c.tellJobs()
	c.callBuf[0] = c
	health := runCalls(ctx, l.client, c.callBuf[:])
	// runCalls may have sent j in another call (withoutOnce), which read it.
	c.clearForReuse()
	l.alone.Put(c)
	return health
}

// scriptFor returns the script for a call whose costs list is list: the
// one-request script when the limiter has one limit and list is one plain
// cost (digits only), the driver otherwise.
func (l *redisLimiter) scriptFor(list string) *redis.Script {
	if l.scriptOne == nil || list == "" {
		return l.script
	}
	for i := 0; i < len(list); i++ {
		if list[i] < '0' || list[i] > '9' {
			return l.script
		}
	}
	return l.scriptOne
}
