package config

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"go.yaml.in/yaml/v3"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
)

// maxPolicyName matches the middleware's bound on policy names.
const maxPolicyName = 64

// policy decodes one policy; shadow is the file's default.
func (d *decoder) policy(k, n *yaml.Node, path string, shadow bool) *Policy {
	p := &Policy{Name: k.Value, Cost: 1, Shadow: shadow, at: position{k.Line, path}}
	if !validName(p.Name) {
		d.fail(k, path, "a policy name is 1 to %d letters, digits, '-', '_' or '.'", maxPolicyName)
	}
	var alg string
	var limitsNode, keyNode, plansNode *yaml.Node
	d.mapping(n, path,
		field{"algorithm", d.str(&alg)},
		field{"limits", func(n *yaml.Node, _ string) { limitsNode = n }},
		field{"key", func(n *yaml.Node, path string) { keyNode = n; p.Key = d.key(n, path) }},
		field{"cost", d.integer(&p.Cost, "cost")},
		field{"shadow", d.boolean(&p.Shadow)},
		field{"delay", d.duration(&p.Delay)},
		field{"plan_resolver", func(n *yaml.Node, path string) {
			p.resolverAt = position{n.Line, path}
			d.str(&p.PlanResolver)(n, path)
		}},
		field{"plans", func(n *yaml.Node, _ string) { plansNode = n }},
	)
	if n.Kind != yaml.MappingNode {
		return nil
	}
	p.Algorithm = d.algorithm(n, path, alg)
	p.Limits = d.limitList(n, limitsNode, join(path, "limits"), p.Algorithm)
	if keyNode == nil {
		d.fail(n, join(path, "key"), "missing: ip, {kind: api_key, ...} or {kind: func, name: ...}")
	}
	if p.Algorithm != "" && p.Limits != nil {
		d.checkCost(valueNode(n, "cost"), join(path, "cost"), p.Cost, p.Algorithm, p.Limits)
	}
	if p.Delay != 0 {
		switch dn := valueNode(n, "delay"); {
		case p.Delay < 0 || p.Delay > algorithms.MaxDelay:
			d.fail(dn, join(path, "delay"), "must be above 0 and at most %s", algorithms.MaxDelay)
		case p.Algorithm != "" && p.Algorithm != algorithms.TokenBucket && p.Algorithm != algorithms.LeakyBucket:
			d.fail(dn, join(path, "delay"), "only token_bucket and leaky_bucket can delay a request")
		}
	}
	switch {
	case plansNode != nil && p.PlanResolver == "":
		d.fail(plansNode, join(path, "plan_resolver"), "missing: plans need a resolver registered with WithPlanResolver")
	case plansNode == nil && p.PlanResolver != "":
		d.fail(n, join(path, "plans"), "missing: a plan resolver without plans")
	case plansNode != nil && plansNode.Kind == yaml.MappingNode && len(plansNode.Content) == 0:
		d.fail(plansNode, join(path, "plans"), "empty: name at least one plan")
	case plansNode != nil:
		p.Plans = map[string]Plan{}
		d.entries(plansNode, join(path, "plans"), func(k, v *yaml.Node, path string) {
			if !validName(k.Value) {
				d.fail(k, path, "a plan name is 1 to %d letters, digits, '-', '_' or '.'", maxPolicyName)
			}
			plan := Plan{Algorithm: p.Algorithm}
			var alg string
			var limits *yaml.Node
			d.mapping(v, path,
				field{"algorithm", d.str(&alg)},
				field{"limits", func(n *yaml.Node, _ string) { limits = n }},
			)
			if v.Kind != yaml.MappingNode {
				return
			}
			if alg != "" {
				plan.Algorithm = d.algorithm(v, path, alg)
			}
			plan.Limits = d.limitList(v, limits, join(path, "limits"), plan.Algorithm)
			if plan.Algorithm != "" && plan.Limits != nil {
				d.checkCost(limits, join(path, "limits"), p.Cost, plan.Algorithm, plan.Limits)
			}
			p.Plans[k.Value] = plan
		})
	}
	return p
}

// algorithm checks an algorithm's name; parent is where a missing one is
// reported.
func (d *decoder) algorithm(parent *yaml.Node, path, name string) algorithms.Algorithm {
	if name == "" {
		d.fail(parent, join(path, "algorithm"), "missing: one of %s", algorithmNames())
		return ""
	}
	for _, a := range algorithms.All() {
		if string(a) == name {
			return a
		}
	}
	d.fail(valueNode(parent, "algorithm"), join(path, "algorithm"), "%q is not one of %s", name, algorithmNames())
	return ""
}

func algorithmNames() string {
	names := make([]string, len(algorithms.All()))
	for i, a := range algorithms.All() {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}

// valueNode returns the value of key in mapping n, or n.
func valueNode(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return n
}

// limitList decodes limits for alg and checks them as algorithms.New
// would. It returns nil when any is wrong.
func (d *decoder) limitList(parent, n *yaml.Node, path string, alg algorithms.Algorithm) []algorithms.Limit {
	if n == nil {
		d.fail(parent, path, "missing: at least one {rate, period}")
		return nil
	}
	before := len(d.errs)
	var limits []algorithms.Limit
	d.list(n, path, func(item *yaml.Node, path string) {
		var l algorithms.Limit
		burstGiven := false
		d.mapping(item, path,
			field{"rate", d.integer(&l.Rate, "rate")},
			field{"period", d.duration(&l.Period)},
			field{"burst", func(n *yaml.Node, path string) { burstGiven = true; d.integer(&l.Burst, "burst")(n, path) }},
		)
		if item.Kind != yaml.MappingNode {
			return
		}
		if l.Rate == 0 && valueNode(item, "rate") == item {
			d.fail(item, join(path, "rate"), "missing")
		}
		if l.Period == 0 && valueNode(item, "period") == item {
			d.fail(item, join(path, "period"), "missing")
		}
		if burstGiven && alg != "" && alg != algorithms.TokenBucket && alg != algorithms.LeakyBucket {
			d.fail(valueNode(item, "burst"), join(path, "burst"), "%s has no burst: only token_bucket and leaky_bucket do", alg)
		}
		if l.Rate > 0 && l.Period > 0 && alg != "" {
			if err := l.Validate(alg); err != nil {
				d.fail(item, path, "%s", strings.TrimPrefix(err.Error(), algorithms.ErrInvalidLimit.Error()+": "))
			}
		}
		limits = append(limits, l)
	})
	if len(d.errs) > before || alg == "" {
		return nil
	}
	if len(limits) == 0 {
		d.fail(n, path, "empty: give at least one {rate, period}")
		return nil
	}
	// What New refuses beyond single limits: two that alg treats as one.
	if _, err := algorithms.New(scratchStore(), alg, limits...); err != nil {
		d.fail(n, path, "%s", strings.TrimPrefix(err.Error(), algorithms.ErrInvalidLimit.Error()+": "))
		return nil
	}
	return limits
}

// scratchStore is a memory store to check limits with: New refuses only
// invalid options, and it is given none.
func scratchStore() algorithms.Store {
	st, _ := memstore.New()
	return st
}

// checkCost refuses a cost that exceeds a limit's whole quota: no request
// could ever pass.
func (d *decoder) checkCost(n *yaml.Node, path string, cost int, alg algorithms.Algorithm, limits []algorithms.Limit) {
	lim, err := algorithms.New(scratchStore(), alg, limits...)
	if err != nil {
		return // reported with the limits
	}
	for i, p := range lim.Policies() {
		if cost > p.Quota {
			d.fail(n, path, "cost %d exceeds the quota %d of limit %d: no request could pass", cost, p.Quota, i)
		}
	}
}

// routes decodes the routes and checks each names a known policy, once.
func (d *decoder) routes(n *yaml.Node, c *Config) {
	seen := map[string]bool{}
	d.list(n, "routes", func(item *yaml.Node, path string) {
		r := Route{at: position{item.Line, path}}
		d.mapping(item, path,
			field{"method", d.oneOf(&r.Method, methods...)},
			field{"path", d.str(&r.Path)},
			field{"policy", d.str(&r.Policy)},
		)
		if item.Kind != yaml.MappingNode {
			return
		}
		for _, f := range []struct{ name, v string }{{"method", r.Method}, {"path", r.Path}, {"policy", r.Policy}} {
			if f.v == "" && valueNode(item, f.name) == item {
				d.fail(item, join(path, f.name), "missing")
			}
		}
		if r.Path != "" && !strings.HasPrefix(r.Path, "/") {
			d.fail(valueNode(item, "path"), join(path, "path"), "%q: a chi pattern starts with /", r.Path)
		} else if r.Path != "" {
			if err := checkPattern(r.Path); err != nil {
				d.fail(valueNode(item, "path"), join(path, "path"), "%q: %v", r.Path, err)
			}
		}
		if r.Policy != "" && c.Policies[r.Policy] == nil {
			d.fail(valueNode(item, "policy"), join(path, "policy"), "no policy %q", r.Policy)
		}
		if r.Method != "" && r.Path != "" {
			if seen[r.ID()] {
				d.fail(item, path, "%s is given twice", r.ID())
			}
			seen[r.ID()] = true
		}
		c.Routes = append(c.Routes, r)
	})
}

// methods are the methods a route may name.
var methods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace,
}

// validName reports whether s is a policy or plan name: it appears in
// headers and metrics, so it is kept plain.
func validName(s string) bool {
	if s == "" || len(s) > maxPolicyName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// checkPattern reports whether chi accepts pattern: chi panics on a
// pattern it cannot route (an unclosed brace, a wildcard before the end),
// and Mount must not.
func checkPattern(pattern string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("not a chi pattern: %v", p)
		}
	}()
	chi.NewRouter().Method(http.MethodGet, pattern, http.NotFoundHandler())
	return nil
}
