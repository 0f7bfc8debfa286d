package config

import (
	"fmt"
	"net/http"
	"sort"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/middleware/chiroute"
)

// generation is one configuration, built: what requests run under between
// two swaps. It is never changed once published.
type generation struct {
	cfg      *Config
	store    *openStore
	policies map[string]func(http.Handler) http.Handler
	limiters map[string]policyLimiters // by policy name, for the operator
	handlers []http.Handler            // the mounted routes, by mount index, wrapped
	// pattern turns a route into the pattern its middleware counts by:
	// Mount's or MountMux's; nil before either, which counts as Mount's.
	pattern func(Route) (string, error)
	ops     []http.Handler // the operator handlers, by Operator's index
}

// policyLimiters are a policy's limiters: its own, and its plans' by name.
type policyLimiters struct {
	own   algorithms.RateLimiter
	plans map[string]algorithms.RateLimiter
}

// errAt formats a Build error at a place in c's file.
func errAt(c *Config, at position, format string, args ...any) error {
	return &Error{File: c.Name, Line: at.line, Field: at.path, Msg: fmt.Sprintf(format, args...)}
}

// build makes a generation of c on store.
func build(c *Config, store *openStore, o *options) (*generation, error) {
	g := &generation{cfg: c, store: store, policies: map[string]func(http.Handler) http.Handler{},
		limiters: map[string]policyLimiters{}}
	common, err := commonOf(c)
	if err != nil {
		return nil, err
	}
	// In name order, so that the first error is the same on every run.
	names := make([]string, 0, len(c.Policies))
	for name := range c.Policies {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := c.Policies[name]
		if p == nil {
			return nil, fmt.Errorf("%w: %s: policy %q is nil", ErrInvalid, c.Name, name)
		}
		mw, lims, err := policyMiddleware(c, p, common, store, o)
		if err != nil {
			return nil, err
		}
		g.policies[name], g.limiters[name] = mw, lims
	}
	// A Config made in code rather than by Parse may name what is not there.
	for _, r := range c.Routes {
		if g.policies[r.Policy] == nil {
			return nil, errAt(c, r.at, "no policy %q", r.Policy)
		}
	}
	return g, nil
}

// shared is what every policy's middleware takes from the file's top
// level.
type shared struct {
	trust   keyfunc.IPOption
	skip    func(*http.Request) bool // nil: none
	credKey keyfunc.KeyFunc
	failure middleware.ErrorPolicy
}

// commonOf reads the settings every policy shares.
func commonOf(c *Config) (shared, error) {
	sh := shared{trust: keyfunc.TrustProxies(c.TrustedProxies...), failure: middleware.RefuseOnError}
	if len(c.Skip) > 0 {
		in, err := keyfunc.ClientIPIn(c.Skip, sh.trust)
		if err != nil {
			return sh, fmt.Errorf("%w: %s: skip.networks: %w", ErrInvalid, c.Name, err)
		}
		sh.skip = in
	}
	credKey, err := keyfunc.NewIP(sh.trust)
	if err != nil {
		return sh, fmt.Errorf("%w: %s: trusted_proxies: %w", ErrInvalid, c.Name, err)
	}
	sh.credKey = credKey
	if c.FailurePolicy == "open" {
		sh.failure = middleware.PassOnError
	}
	return sh, nil
}

// policyMiddleware builds the middleware of policy p on store, and
// returns its limiters.
func policyMiddleware(c *Config, p *Policy, sh shared, store *openStore, o *options) (func(http.Handler) http.Handler, policyLimiters, error) {
	var lims policyLimiters
	lim, err := algorithms.New(store.store, p.Algorithm, p.Limits...)
	if err != nil {
		return nil, lims, errAt(c, p.at, "%v", err)
	}
	lims.own = lim
	kf, err := keyFuncOf(c, p, sh.trust, o)
	if err != nil {
		return nil, lims, err
	}
	opts := []middleware.Option{
		middleware.WithPolicyName(p.Name),
		middleware.WithKeyFunc(kf),
		middleware.WithRoutePattern(chiroute.Pattern), // chi's pattern, r.Pattern elsewhere
		middleware.WithCredentialFailureKey(sh.credKey),
		middleware.WithLogger(o.logger),
		middleware.WithShadow(p.Shadow),
		middleware.WithErrorPolicy(sh.failure),
	}
	if p.Delay > 0 {
		opts = append(opts, middleware.WithDelay(p.Delay))
	}
	if store.settings.timeout > 0 {
		// The middleware's own deadline would otherwise cut the
		// store's short at its default.
		opts = append(opts, middleware.WithTimeout(store.settings.timeout))
	}
	if o.observer != nil {
		opts = append(opts, middleware.WithObserver(o.observer))
	}
	if sh.skip != nil {
		opts = append(opts, middleware.WithSkip(sh.skip))
	}
	if p.Cost > 1 {
		cost := p.Cost
		opts = append(opts, middleware.WithCost(func(*http.Request) int { return cost }))
	}
	if p.PlanResolver != "" {
		pick, plans, err := planPicker(c, p, store.store, o)
		if err != nil {
			return nil, lims, err
		}
		lims.plans = plans
		opts = append(opts, middleware.WithLimiterFunc(pick))
	}
	mw, err := middleware.New(lim, append(opts, o.mwOpts...)...)
	if err != nil {
		return nil, lims, errAt(c, p.at, "%v", err)
	}
	return mw, lims, nil
}

// keyFuncOf builds policy p's key function.
func keyFuncOf(c *Config, p *Policy, trust keyfunc.IPOption, o *options) (keyfunc.KeyFunc, error) {
	k := p.Key
	switch k.Kind {
	case KeyIP:
		// Checked here too for a Config made in code, in the file's terms.
		if b := boundOf("ipv6_prefix"); k.IPv6Prefix < b.min || k.IPv6Prefix > b.max {
			return nil, errAt(c, position{k.at.line, join(k.at.path, "ipv6_prefix")}, "%d is outside %s", k.IPv6Prefix, b)
		}
		kf, err := keyfunc.NewIP(trust, keyfunc.IPv6Prefix(k.IPv6Prefix))
		if err != nil {
			return nil, errAt(c, k.at, "%v", err)
		}
		return kf, nil
	case KeyAPIKey:
		known, ok := o.knownKeys[k.KnownKeys]
		if !ok {
			return nil, errAt(c, k.at, "known_keys %q: no check of API keys registered under that name (config.WithKnownKeys)", k.KnownKeys)
		}
		return keyfunc.APIKey(k.Header, keyfunc.KnownAPIKey(known)), nil
	case KeyFunc:
		kf, ok := o.keyFuncs[k.Func]
		if !ok {
			return nil, errAt(c, k.at, "name %q: no key function registered under that name (config.WithKeyFunc)", k.Func)
		}
		return kf, nil
	}
	return nil, errAt(c, k.at, "unknown key kind %q", k.Kind)
}

// planPicker builds the limiters of p's plans, by plan name, and the
// function that picks one per request.
func planPicker(c *Config, p *Policy, store algorithms.Store, o *options) (func(*http.Request, string) algorithms.Limiter, map[string]algorithms.RateLimiter, error) {
	resolve, ok := o.resolvers[p.PlanResolver]
	if !ok {
		return nil, nil, errAt(c, p.resolverAt, "%q: no plan resolver registered under that name (config.WithPlanResolver)", p.PlanResolver)
	}
	plans := make(map[string]algorithms.RateLimiter, len(p.Plans))
	for name, plan := range p.Plans {
		lim, err := algorithms.New(store, plan.Algorithm, plan.Limits...)
		if err != nil {
			return nil, nil, errAt(c, p.at, "plans.%s: %v", name, err)
		}
		plans[name] = lim
	}
	return func(r *http.Request, key string) algorithms.Limiter {
		if lim, ok := plans[resolve(r, key)]; ok {
			return lim
		}
		return nil // the policy's own limits
	}, plans, nil
}
