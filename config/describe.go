package config

import (
	"time"

	"github.com/redlimit/redlimit/algorithms"
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
