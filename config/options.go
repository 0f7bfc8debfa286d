package config

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/redisstore"
)

// Option configures Build: what the file names and code provides. A
// Runtime keeps its options for every reload.
type Option func(*options)

type options struct {
	keyFuncs  map[string]keyfunc.KeyFunc
	knownKeys map[string]func(string) bool
	resolvers map[string]func(*http.Request, string) string
	logger    *slog.Logger
	observer  middleware.Observer
	mwOpts    []middleware.Option
	memOpts   []memstore.Option
	redisOpts []redisstore.Option
	client    redis.UniversalClient // WithRedisClient
	store     algorithms.Store      // WithStore
	errs      []error
}

// WithKeyFunc registers a key function under name, for policies whose key
// is {kind: func, name: <name>}: a JWT subject with the application's
// keys, a FirstOf, anything keyfunc offers that needs code.
func WithKeyFunc(name string, kf keyfunc.KeyFunc) Option {
	return func(o *options) {
		if kf == nil {
			o.errs = append(o.errs, fmt.Errorf("%w: WithKeyFunc(%q): nil function", ErrInvalid, name))
			return
		}
		o.keyFuncs[name] = kf
	}
}

// WithKnownKeys registers a check of API keys under name, for policies
// whose key is {kind: api_key, known_keys: <name>} (keyfunc.KnownAPIKey).
// It receives the raw key, must be fast and must not log it.
func WithKnownKeys(name string, known func(raw string) bool) Option {
	return func(o *options) {
		if known == nil {
			o.errs = append(o.errs, fmt.Errorf("%w: WithKnownKeys(%q): nil function", ErrInvalid, name))
			return
		}
		o.knownKeys[name] = known
	}
}

// WithPlanResolver registers under name a function that returns the plan
// of a request, given the request and its key (for an API key,
// "key:" + keyfunc.HashAPIKey(raw)), for policies whose plan_resolver is
// <name>. A plan the policy does not list, or "", gets the policy's own
// limits.
func WithPlanResolver(name string, resolve func(r *http.Request, key string) string) Option {
	return func(o *options) {
		if resolve == nil {
			o.errs = append(o.errs, fmt.Errorf("%w: WithPlanResolver(%q): nil function", ErrInvalid, name))
			return
		}
		o.resolvers[name] = resolve
	}
}

// WithLogger sets the logger of the middlewares, the Redis store and the
// reloads; the default is slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithObserver sets the middlewares' observer; when it is also an
// redisstore.Observer (as *metrics.Metrics is), the Redis store's too.
func WithObserver(obs middleware.Observer) Option {
	return func(o *options) { o.observer = obs }
}

// WithMiddlewareOptions adds options to every policy's middleware, after
// those the file sets (a denied handler, a clock for tests).
func WithMiddlewareOptions(opts ...middleware.Option) Option {
	return func(o *options) { o.mwOpts = append(o.mwOpts, opts...) }
}

// WithMemoryStoreOptions adds options to a memory store, after those the file sets
// (a clock for tests). They are part of the store's settings: a store is
// kept across reloads, so they apply from Build on.
func WithMemoryStoreOptions(opts ...memstore.Option) Option {
	return func(o *options) { o.memOpts = append(o.memOpts, opts...) }
}

// WithRedisStoreOptions adds options to a Redis store, after those the
// file sets, as WithMemoryStoreOptions does for a memory store.
func WithRedisStoreOptions(opts ...redisstore.Option) Option {
	return func(o *options) { o.redisOpts = append(o.redisOpts, opts...) }
}

// WithRedisClient makes the Redis store on the application's own go-redis
// client (a *redis.Client, a Sentinel FailoverClient, a *redis.ClusterClient)
// instead of a connection the file names. The file's redis section, if
// any, then gives only the store's settings (prefix, timeout,
// failure_mode, instances, denial_cache): a connection, credentials, TLS,
// timeouts or a pool size there are an error, since the client has its
// own. The client stays the application's: reloads and Close never close
// it. Give it ContextTimeoutEnabled, as the clients this package makes
// have, so that a decision's deadline bounds its commands.
func WithRedisClient(c redis.UniversalClient) Option {
	return func(o *options) {
		if c == nil {
			o.errs = append(o.errs, fmt.Errorf("%w: WithRedisClient: nil client", ErrInvalid))
			return
		}
		o.client = c
	}
}

// WithStore makes every policy's limiters on the application's store
// (memstore.New or redisstore.New, with its own
// options), shared with the application's other limiters. The file must
// then have neither a redis nor a memory section (an error otherwise: its
// limits would not be where it says), and WithMemoryStoreOptions and WithRedisStoreOptions do not apply.
// The store stays the application's: reloads and Close never close it.
// The middleware's deadline is then its default (middleware.WithTimeout
// through WithMiddlewareOptions sets another), not the store's.
func WithStore(s algorithms.Store) Option {
	return func(o *options) {
		if s == nil {
			o.errs = append(o.errs, fmt.Errorf("%w: WithStore: nil store", ErrInvalid))
			return
		}
		o.store = s
	}
}

func newOptions(opts []Option) (*options, error) {
	o := &options{
		keyFuncs:  map[string]keyfunc.KeyFunc{},
		knownKeys: map[string]func(string) bool{},
		resolvers: map[string]func(*http.Request, string) string{},
		logger:    slog.Default(),
	}
	for i, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: option %d is nil", ErrInvalid, i)
		}
		opt(o)
	}
	switch {
	case len(o.errs) > 0:
		return nil, o.errs[0]
	case o.store != nil && o.client != nil:
		return nil, fmt.Errorf("%w: WithStore and WithRedisClient: give one", ErrInvalid)
	case o.store != nil && len(o.memOpts)+len(o.redisOpts) > 0:
		return nil, fmt.Errorf("%w: store options with WithStore: give the options where the store is made", ErrInvalid)
	}
	return o, nil
}
