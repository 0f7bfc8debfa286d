package subjects

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/redisstore"
)

// RedlimitMemory returns redlimit's middleware on the memory store, one
// subject per algorithm, then the fixed window with the three headers
// go-chi/httprate sends (ThreeHeaders).
func RedlimitMemory() []Subject {
	out := make([]Subject, 0, len(algorithms.All())+1)
	for _, alg := range algorithms.All() {
		out = append(out, RedlimitSubject(alg, memoryStore, ""))
	}
	return append(out, RedlimitSubject(algorithms.FixedWindow, memoryStore, ThreeHeaders, middleware.WithIETFHeaders(false)))
}

// ThreeHeaders names the variant of redlimit's memory middleware without
// the IETF RateLimit and RateLimit-Policy fields: X-RateLimit-Limit,
// -Remaining and -Reset alone, the fields go-chi/httprate sends.
const ThreeHeaders = "three headers"

// RedlimitRedis returns redlimit's middleware on the Redis store, one
// subject per algorithm, with the store's defaults.
func RedlimitRedis() []Subject {
	out := make([]Subject, 0, len(algorithms.All()))
	for _, alg := range algorithms.All() {
		out = append(out, RedlimitRedisSubject(alg, ""))
	}
	return out
}

// LeaseTTL is the lease ttl of the leased subjects: a second, as in
// docs/redis.md's "Leased quotas" example; a key asked for more than once
// a second decides from leases.
const LeaseTTL = time.Second

// LeasedVariant names the leased subjects' variant, the ttl in it.
var LeasedVariant = "leased " + LeaseTTL.String()

// RedlimitLeased returns redlimit's middleware on a Redis store with
// WithLeases(LeaseTTL), one subject per algorithm that decides from
// leases: every one but the sliding window log, which would decide in
// Redis exactly, as RedlimitRedis's row does.
func RedlimitLeased() []Subject {
	var out []Subject
	for _, alg := range LeasedAlgorithms() {
		out = append(out, RedlimitRedisSubject(alg, LeasedVariant, redisstore.WithLeases(LeaseTTL)))
	}
	return out
}

// LeasedAlgorithms are the algorithms that decide from leases under
// WithLeases (with one limit): all but the sliding window log.
func LeasedAlgorithms() []algorithms.Algorithm {
	var out []algorithms.Algorithm
	for _, alg := range algorithms.All() {
		if alg != algorithms.SlidingWindowLog {
			out = append(out, alg)
		}
	}
	return out
}

// memoryStore is the store of redlimit's memory subjects.
func memoryStore() algorithms.Store {
	st, _ := memstore.New() // no options: nothing to refuse
	return st
}

// RedlimitRedisSubject is redlimit's middleware on the Redis store with
// alg and the given store options; variant, if not empty, is added to the
// row's name.
func RedlimitRedisSubject(alg algorithms.Algorithm, variant string, opts ...redisstore.Option) Subject {
	name := "redlimit, redis, " + string(alg)
	if variant != "" {
		name += ", " + variant
	}
	return Subject{Name: name, Kind: Redis, Build: func(env Env, next http.Handler) (*Instance, error) {
		client, cmds := newClient(env)
		store, err := redisstore.New(client, opts...)
		if err != nil {
			_ = client.Close()
			return nil, err
		}
		inst, err := buildRedlimit(env, next, alg, store)
		closeAll := func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = store.Close(ctx) // before its client
			_ = client.Close()
		}
		if err != nil {
			closeAll()
			return nil, err
		}
		inst.Close, inst.Commands = closeAll, cmds.count
		return inst, nil
	}}
}

// RedlimitSubject is redlimit's middleware, with mwOpts, on a store that
// newStore makes with no arguments (the memory store); variant as in
// RedlimitRedisSubject.
func RedlimitSubject(alg algorithms.Algorithm, newStore func() algorithms.Store, variant string, mwOpts ...middleware.Option) Subject {
	name := "redlimit, memory, " + string(alg)
	if variant != "" {
		name += ", " + variant
	}
	return Subject{Name: name, Kind: Memory, Build: func(env Env, next http.Handler) (*Instance, error) {
		inst, err := buildRedlimit(env, next, alg, newStore(), mwOpts...)
		if err != nil {
			return nil, err
		}
		inst.Close = func() {}
		return inst, nil
	}}
}

// Limit returns the limit every redlimit subject enforces with alg: Rate
// per Period, the sliding window log's Rate capped at its maximum.
func Limit(env Env, alg algorithms.Algorithm) algorithms.Limit {
	l := algorithms.Limit{Rate: env.Rate, Period: env.Period}
	if alg == algorithms.SlidingWindowLog {
		l.Rate = min(l.Rate, algorithms.MaxSlidingLogRate)
	}
	return l
}

// loopback is the proxy the real-HTTP runs trust.
var loopback = netip.MustParsePrefix("127.0.0.0/8")

func buildRedlimit(env Env, next http.Handler, alg algorithms.Algorithm, store algorithms.Store, mwOpts ...middleware.Option) (*Instance, error) {
	lim, err := algorithms.New(store, alg, Limit(env, alg))
	if err != nil {
		return nil, fmt.Errorf("redlimit %s: %w", alg, err)
	}
	obs := &outcomes{}
	opts := append([]middleware.Option{middleware.WithObserver(obs)}, mwOpts...)
	if env.Forwarded {
		opts = append(opts, middleware.WithKeyFunc(keyfunc.IP(keyfunc.TrustProxies(loopback))))
	}
	mw, err := middleware.New(lim, opts...)
	if err != nil {
		return nil, fmt.Errorf("redlimit middleware: %w", err)
	}
	return &Instance{Handler: mw(next), StandIns: obs.standIns.Load, Cached: obs.cached.Load}, nil
}

// outcomes counts the outcomes that tell whether a measurement of the
// Redis store measured Redis: stand-in decisions and cached denials. The
// common outcomes touch no shared counter, so it costs next to nothing.
type outcomes struct {
	standIns, cached atomic.Int64
}

// Decision counts one request's outcome.
func (o *outcomes) Decision(d middleware.Decision) {
	switch d.Outcome {
	case middleware.OutcomeAllowed, middleware.OutcomeDenied:
	case middleware.OutcomeCacheDenied:
		o.cached.Add(1)
	default:
		o.standIns.Add(1)
	}
}

// BreakerChanged ignores the breaker: its effects show as stand-ins.
func (o *outcomes) BreakerChanged(string, bool) {}
