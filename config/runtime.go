package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/operator"
)

// RetireAfter is how long a store replaced by a reload keeps its Redis
// client open, so that decisions in flight on it end normally.
const RetireAfter = 10 * time.Second

// Runtime serves mounted routes behind the policies of one configuration
// at a time. Reloads swap the whole set at once: each request loads the
// current set once, so it runs wholly under the old or wholly under the new
// one, and none waits or fails for the swap.
type Runtime struct {
	opts *options
	cur  atomic.Pointer[generation]

	mu      sync.Mutex // serializes Mount, Operator, reloads and Close
	mounted []*mounted
	opsOpts [][]operator.Option // the options of each Operator call
	closed  bool
}

// mounted is one route as Mount registered it on the router.
type mounted struct {
	rt    *Runtime
	index int
	route Route
	h     http.Handler
}

// ServeHTTP runs the request under the current policy set.
func (m *mounted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.rt.cur.Load().handlers[m.index].ServeHTTP(w, r)
}

// Build makes the store, the limiters and a middleware per policy, and
// returns a Runtime ready to Mount. Names the file uses but no option
// registers (key functions, checks of API keys, plan resolvers) are errors
// wrapping ErrInvalid, naming the line.
func (c *Config) Build(opts ...Option) (*Runtime, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	settings, err := settingsOf(c, o)
	if err != nil {
		return nil, err
	}
	store, err := newStore(c, settings, o)
	if err != nil {
		return nil, err
	}
	g, err := build(c, store, o)
	if err != nil {
		store.closeNow()
		return nil, err
	}
	rt := &Runtime{opts: o}
	rt.cur.Store(g)
	return rt, nil
}

// Reload builds c and swaps it in. On any error the running set stays and
// the error (wrapping ErrInvalid) is returned.
//
// What a reload can change: policies (algorithm, limits, key, cost, plans,
// shadow), which policy each route has, trusted proxies, the skip list,
// the failure policy. Counts survive for every policy whose algorithm and
// limits stay the same (they are kept by algorithm and limit, per route,
// in the store), also when it is renamed or its key changes kind. Changing
// the store's settings (redis or memory) makes a new store: in memory
// every count starts afresh; with Redis, counts in the same server and
// prefix remain, but the local twin's and the denial cache start afresh.
// What it cannot change: the set of routes, since handlers come from code
// (a file that adds or removes a route is refused), and the names the code
// registered.
func (rt *Runtime) Reload(c *Config) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return fmt.Errorf("%w: the runtime is closed", ErrInvalid)
	}
	old := rt.cur.Load()
	if rt.mounted != nil {
		if err := sameRoutes(c, rt.mounted); err != nil {
			return err
		}
	}
	store := old.store
	settings, err := settingsOf(c, rt.opts)
	if err != nil {
		return err
	}
	fresh := settings != store.settings
	if fresh {
		var err error
		if store, err = newStore(c, settings, rt.opts); err != nil {
			return err
		}
	}
	g, err := build(c, store, rt.opts)
	if err == nil {
		g.pattern = old.pattern
		err = rt.operators(g)
	}
	if err != nil {
		if fresh {
			store.closeNow()
		}
		return err
	}
	g.handlers = wrap(g, rt.mounted)
	rt.cur.Store(g)
	if fresh {
		retired, logger := old.store, rt.opts.logger
		time.AfterFunc(RetireAfter, func() {
			ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
			defer cancel()
			if err := retired.close(ctx); err != nil {
				logger.LogAttrs(ctx, slog.LevelWarn, "redlimit: the store a reload retired did not close cleanly", slog.Any("error", err))
			}
		})
	}
	return nil
}

// sameRoutes checks that c has exactly the mounted routes.
func sameRoutes(c *Config, ms []*mounted) error {
	have := map[string]bool{}
	for _, route := range c.Routes {
		have[route.ID()] = true
	}
	var problems []string
	for _, m := range ms {
		if !have[m.route.ID()] {
			problems = append(problems, "route "+m.route.ID()+" is mounted but not in the new file")
		}
		delete(have, m.route.ID())
	}
	for _, route := range c.Routes {
		if have[route.ID()] {
			problems = append(problems, fmt.Sprintf("%s:%d: route %s has no handler: new routes need code", c.Name, route.at.line, route.ID()))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	return nil
}

// ReloadFile loads the file at path and swaps it in. A file that does not
// load, validate or build leaves the running set as it is; the error is
// logged and returned.
func (rt *Runtime) ReloadFile(path string) error {
	c, err := Load(path)
	if err == nil {
		err = rt.Reload(c)
	}
	if err != nil {
		rt.opts.logger.LogAttrs(context.Background(), slog.LevelError,
			"redlimit: configuration not reloaded; the previous one stays in force", slog.Any("error", err))
		return err
	}
	rt.opts.logger.LogAttrs(context.Background(), slog.LevelInfo,
		"redlimit: configuration reloaded", slog.String("file", c.Name), slog.Int("policies", len(c.Policies)))
	return nil
}

// Config returns the configuration in force, which the caller must not
// modify.
func (rt *Runtime) Config() *Config { return rt.cur.Load().cfg }

// Store describes the store in force, naming no password: "memory (this
// process only)", "Redis at host:port db n", "Redis Sentinel master m via
// host:port, ... db n", "Redis Cluster via host:port, ..." (each with " over
// TLS" when it is), "Redis through the application's client" or "the
// application's store".
func (rt *Runtime) Store() string { return rt.cur.Load().store.desc }

// Close closes the store in force, unless the application gave it
// (WithStore): a Redis store stops its background work and sends Redis
// what it owes until ctx ends (see redisstore.Store.Close, whose error it
// returns), and then the Redis client this package made for it is closed,
// not one the application gave (WithRedisClient). Requests served
// afterwards are decided by the store's failure mode. Give ctx a deadline,
// such as the rest of the application's shutdown.
func (rt *Runtime) Close(ctx context.Context) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return errors.New("config: runtime closed twice")
	}
	rt.closed = true
	return rt.cur.Load().store.close(ctx)
}
