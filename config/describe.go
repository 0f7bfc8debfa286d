package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redisurl"
)

// RouteInfo describes one route of a configuration: what it is limited by.
type RouteInfo struct {
	Method    string
	Path      string
	Policy    string
	Algorithm algorithms.Algorithm
	// Limits as the file gives them; Burst is 0 where not given.
	Limits []algorithms.Limit
	// Key is "ip", "api_key" or the registered key function's name.
	Key string
	// Cost is what each request consumes.
	Cost int
	// Shadow reports shadow mode.
	Shadow bool
	// Delay is how long a request may be held for its turn (0: none).
	Delay time.Duration
	// Plans maps each plan to its algorithm and limits.
	Plans map[string]Plan
}

// Describe lists the configuration's routes in the file's order. A route
// whose policy is missing (a Config made in code) has only its method,
// path and policy name.
func (c *Config) Describe() []RouteInfo {
	out := make([]RouteInfo, 0, len(c.Routes))
	for _, r := range c.Routes {
		p := c.Policies[r.Policy]
		if p == nil {
			out = append(out, RouteInfo{Method: r.Method, Path: r.Path, Policy: r.Policy})
			continue
		}
		info := RouteInfo{Method: r.Method, Path: r.Path, Policy: p.Name, Algorithm: p.Algorithm,
			Limits: append([]algorithms.Limit(nil), p.Limits...), Key: p.Key.Describe(), Cost: p.Cost, Shadow: p.Shadow, Delay: p.Delay}
		if len(p.Plans) > 0 {
			info.Plans = make(map[string]Plan, len(p.Plans))
			for name, plan := range p.Plans {
				info.Plans[name] = Plan{Algorithm: plan.Algorithm, Limits: append([]algorithms.Limit(nil), plan.Limits...)}
			}
		}
		out = append(out, info)
	}
	return out
}

// DescribeStore says where the file keeps the counts, as Runtime.Store
// would once built, but without reading the environment or any file, and
// naming no password: "memory (this process only)", "Redis at host:port
// db n", "Redis at the URL in $NAME, else memory", "Redis Sentinel master
// m via host:port, ... db n", "Redis Cluster via host:port, ...", each
// Redis one with " over TLS" when it is, or "Redis through the
// application's client" when the file names no connection.
func (c *Config) DescribeStore() string {
	r := c.Redis
	tls := ""
	if r != nil && (r.TLS != nil || strings.HasPrefix(r.URL, "rediss:")) {
		tls = " over TLS"
	}
	switch {
	case r == nil:
		return "memory (this process only)"
	case r.URLEnv != "":
		return "Redis at the URL in $" + r.URLEnv + ", else memory" + tls
	case r.URL != "":
		ro, err := redisurl.Parse(r.URL)
		if err != nil {
			return "Redis at an invalid URL"
		}
		return fmt.Sprintf("Redis at %s db %d%s", ro.Addr, ro.DB, tls)
	case r.Addr != "":
		return fmt.Sprintf("Redis at %s db %d%s", r.Addr, r.DB, tls)
	case r.Sentinel != nil:
		return fmt.Sprintf("Redis Sentinel master %s via %s db %d%s", r.Sentinel.MasterName, strings.Join(r.Sentinel.Addrs, ", "), r.DB, tls)
	case r.Cluster != nil:
		return fmt.Sprintf("Redis Cluster via %s%s", strings.Join(r.Cluster.Addrs, ", "), tls)
	}
	return "Redis through the application's client"
}
