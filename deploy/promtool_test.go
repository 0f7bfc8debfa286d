// Package deploy holds what operators load into their tools: Prometheus
// alert rules (prometheus/) and a Grafana dashboard (grafana/). Its tests
// check them against what package metrics exports, and run promtool.
package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// requirePromtool returns promtool's path. Without it the test skips, or
// fails under CI=true, where a skipped check of the alert rules would
// hide a gap; .ci/install-redis.sh (make test) installs it where it can.
func requirePromtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err == nil {
		return path
	}
	if strings.EqualFold(os.Getenv("CI"), "true") {
		t.Fatal("promtool not found; CI requires the alert rule tests: install Debian's prometheus package (bash .ci/install-redis.sh does)")
	}
	t.Skip("promtool not found on PATH; skipping the alert rule tests (install Debian's prometheus package to run them)")
	return ""
}

// grafanaVariable is a dashboard variable in a query: $name or ${name}.
var grafanaVariable = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)

// promQL is a dashboard query as Prometheus would receive it: Grafana's
// interval variables ($__rate_interval, $__range) as 5m, the others (label
// value filters) as ".*".
func promQL(expr string) string {
	return grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.HasPrefix(strings.Trim(v, "${"), "__") {
			return "5m"
		}
		return ".*"
	})
}

// dashboardRules writes the dashboard's queries into a rules file of
// recording rules, so that promtool checks their syntax, and returns its
// path.
func dashboardRules(t *testing.T) string {
	t.Helper()
	d, _ := readDashboard(t)
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for i, e := range panelExpressions(d.Panels) {
		rules = append(rules, rule{fmt.Sprintf("dashboard:query_%d", i), promQL(e.expr)})
	}
	if len(rules) == 0 {
		t.Fatalf("%s has no queries", dashboardFile)
	}
	b, err := yaml.Marshal(map[string]any{"groups": []map[string]any{{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// promtool checks the alert rules (syntax, templates, duplicates), runs
// their unit tests (series that must fire each alert and series that must
// not), and parses every dashboard query.
func TestPromtool(t *testing.T) {
	promtool := requirePromtool(t)
	for _, tc := range []struct {
		name string
		args func(t *testing.T) []string
	}{
		{"check rules", func(*testing.T) []string { return []string{"check", "rules", rulesFile} }},
		{"test rules", func(*testing.T) []string { return []string{"test", "rules", rulesTestFile} }},
		{"dashboard queries parse", func(t *testing.T) []string { return []string{"check", "rules", dashboardRules(t)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args(t)
			out, err := exec.Command(promtool, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		})
	}
}

// The dashboard's substitution leaves valid PromQL in the shapes it uses.
func TestPromQL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`rate(a{job=~"$job"}[$__rate_interval])`, `rate(a{job=~".*"}[5m])`},
		{`rate(a{instance=~"${instance}"}[${__range}])`, `rate(a{instance=~".*"}[5m])`},
		{`a > 0.05`, `a > 0.05`},
	} {
		if got := promQL(tc.in); got != tc.want {
			t.Errorf("promQL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
