package config

import (
	"fmt"
	"log/slog"
	"net/http"

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

// WithMemoryStoreOptions adds options to a memory store, after those the
// file sets (a clock for tests). They are part of the store's settings: a
// store is kept across reloads, so they apply from Build on.
func WithMemoryStoreOptions(opts ...memstore.Option) Option {
	return func(o *options) { o.memOpts = append(o.memOpts, opts...) }
}

// WithRedisStoreOptions adds options to a Redis store, after those the
// file sets, as WithMemoryStoreOptions does for a memory store.
func WithRedisStoreOptions(opts ...redisstore.Option) Option {
	return func(o *options) { o.redisOpts = append(o.redisOpts, opts...) }
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
	if len(o.errs) > 0 {
		return nil, o.errs[0]
	}
	return o, nil
}
