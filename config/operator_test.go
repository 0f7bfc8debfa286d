package config

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/operator"
)

// listed is GET /policies's answer.
type listed struct {
	Policies []struct {
		Name   string
		Routes []string
	}
}

// listPolicies asks ops for its policies: name and routes, joined.
func listPolicies(t *testing.T, ops http.Handler) []string {
	t.Helper()
	w := httptest.NewRecorder()
	ops.ServeHTTP(w, httptest.NewRequest("GET", "/policies", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET /policies: %d %s", w.Code, w.Body)
	}
	var l listed
	if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range l.Policies {
		out = append(out, p.Name+" "+strings.Join(p.Routes, ","))
	}
	return out
}

// Policies names each policy and plan with its limiter and its routes in
// the patterns the middleware counts by: chi's after Mount, the
// ServeMux's after MountMux.
func TestPolicies(t *testing.T) {
	chiRoutes := []string{"export /export", "items /items,/items/{id}", "me /me", "plan /plan", "plan:pro /plan",
		"quiet /quiet", "reports /reports"}
	muxRoutes := []string{"export POST /export", "items GET /items,GET /items/{id}", "me GET /me", "plan GET /plan",
		"plan:pro GET /plan", "quiet GET /quiet", "reports GET /reports"}
	tests := []struct {
		name  string
		mount func(t *testing.T) *Runtime
		want  []string
	}{
		{"not mounted", func(t *testing.T) *Runtime { return mustBuild(t, mustParse(t, served), buildOpts(quiet())...) }, chiRoutes},
		{"chi", func(t *testing.T) *Runtime { rt, _ := mount(t, served, buildOpts(quiet())...); return rt }, chiRoutes},
		{"ServeMux", func(t *testing.T) *Runtime { rt, _ := mountMux(t, served, buildOpts(quiet())...); return rt }, muxRoutes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range tt.mount(t).Policies() {
				if p.Limiter == nil {
					t.Errorf("%s: no limiter", p.Name)
				}
				got = append(got, p.Name+" "+strings.Join(p.Routes, ","))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("policies\n%q, want\n%q", got, tt.want)
			}
		})
	}
}

// The operator handler peeks at and resets the clients the mounted routes
// count, and follows reloads: a renamed policy is served under its new
// name, a reset reaches the new set's limiter, and Mount's patterns are
// kept.
func TestOperatorFollowsReloads(t *testing.T) {
	for _, mux := range []bool{false, true} {
		t.Run(map[bool]string{false: "chi", true: "ServeMux"}[mux], func(t *testing.T) {
			var (
				rt    *Runtime
				h     http.Handler
				route = "/items"
			)
			if mux {
				rt, h = mountMux(t, served, buildOpts(quiet())...)
				route = "GET /items"
			} else {
				rt, h = mount(t, served, buildOpts(quiet())...)
			}
			ops, err := rt.Operator()
			if err != nil {
				t.Fatal(err)
			}
			const a = "192.0.2.1:1"
			codes(h, 3, "GET", "/items", a) // the quota of 3 spent
			peek := func(policy string) int {
				w := httptest.NewRecorder()
				ops.ServeHTTP(w, httptest.NewRequest("GET", "/policies/"+policy+"?identity=ip:192.0.2.1&route="+strings.ReplaceAll(route, " ", "%20"), nil))
				return w.Code
			}
			if got := peek("items"); got != http.StatusOK {
				t.Fatalf("peek at items: %d", got)
			}
			renamed := strings.ReplaceAll(edit(t, served, "  items:\n", "  catalog:\n"), "policy: items}", "policy: catalog}")
			if err := reload(t, rt, renamed); err != nil {
				t.Fatal(err)
			}
			if got := peek("items"); got != http.StatusNotFound {
				t.Errorf("peek at items after the rename: %d, want 404", got)
			}
			if got := listPolicies(t, ops)[0]; !strings.HasPrefix(got, "catalog ") || !strings.Contains(got, route) {
				t.Errorf("first policy after the reload: %q, want catalog on %s", got, route)
			}
			// The count survived the rename (same algorithm and limits).
			if got := codes(h, 1, "GET", "/items", a); !equal(got, ints(429)) {
				t.Fatalf("after the rename: %v, want 429", got)
			}
			w := httptest.NewRecorder()
			ops.ServeHTTP(w, httptest.NewRequest("POST", "/policies/catalog?identity=ip:192.0.2.1", nil))
			if w.Code != http.StatusOK {
				t.Fatalf("reset: %d %s", w.Code, w.Body)
			}
			if got := codes(h, 1, "GET", "/items", a); !equal(got, ints(200)) {
				t.Errorf("after the reset: %v, want 200", got)
			}
		})
	}
}

// Operator's options apply, and each handler follows reloads; a closed
// runtime makes none.
func TestOperatorOptions(t *testing.T) {
	rt, _ := mount(t, served, buildOpts(quiet())...)
	a, err := rt.Operator(operator.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := rt.Operator()
	if err != nil {
		t.Fatal(err)
	}
	if err := reload(t, rt, strings.ReplaceAll(edit(t, served, "  quiet:\n", "  hushed:\n"), "policy: quiet}", "policy: hushed}")); err != nil {
		t.Fatal(err)
	}
	for _, ops := range []http.Handler{a, b} {
		if got := strings.Join(listPolicies(t, ops), ";"); !strings.Contains(got, "hushed /quiet") || strings.Contains(got, "quiet /quiet;") {
			t.Errorf("after the reload: %s", got)
		}
	}
	rt.Close(closeCtx())
	if _, err := rt.Operator(); err == nil {
		t.Error("a closed runtime made an operator handler")
	}
}

// A reload whose policies the operator handler cannot serve (a name with
// a '/', which only a Config made in code can have) is refused, and the
// running set stays.
func TestOperatorRefusesReload(t *testing.T) {
	rt, _ := mount(t, served, buildOpts(quiet())...)
	ops, err := rt.Operator()
	if err != nil {
		t.Fatal(err)
	}
	c := mustParse(t, served)
	p := c.Policies["quiet"]
	delete(c.Policies, "quiet")
	p.Name = "quiet/er"
	c.Policies[p.Name] = p
	for i := range c.Routes {
		if c.Routes[i].Policy == "quiet" {
			c.Routes[i].Policy = p.Name
		}
	}
	if err := rt.Reload(c); err == nil || !strings.Contains(err.Error(), "operator") {
		t.Fatalf("reload: %v, want the operator's refusal", err)
	}
	if got := strings.Join(listPolicies(t, ops), ";"); !strings.Contains(got, "quiet /quiet") {
		t.Errorf("after the refused reload: %s", got)
	}
}
