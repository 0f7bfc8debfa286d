package deploy

import (
	"fmt"
	"strings"
	"testing"
)

// datasourceRef is how every panel, query and variable names its data
// source: the dashboard's variable, so that it imports into any Grafana
// whatever its Prometheus data source's uid.
const datasourceRef = "${datasource}"

// The dashboard picks its Prometheus data source through a variable: it
// has one, every data source it names is that variable (Grafana's own
// annotations aside), and it carries no __inputs of an export for sharing.
func TestDashboardDatasourceIsAVariable(t *testing.T) {
	d, raw := readDashboard(t)
	found := false
	for _, v := range d.Templating.List {
		if v.Name == "datasource" {
			found = v.Type == "datasource" && v.Query == "prometheus"
		}
	}
	if !found {
		t.Error(`no variable "datasource" of type datasource, query prometheus`)
	}
	if _, ok := raw["__inputs"]; ok {
		t.Error("__inputs present: the dashboard should use its datasource variable instead")
	}
	var refs int
	for _, problem := range datasourceProblems(raw, "$", &refs) {
		t.Error(problem)
	}
	if refs < 10 {
		t.Errorf("only %d data source references found; is the JSON's shape misread?", refs)
	}
}

// datasourceProblems walks v and returns each "datasource" that is not
// the variable, counting those that are in refs.
func datasourceProblems(v any, path string, refs *int) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			p := path + "." + k
			if k != "datasource" {
				out = append(out, datasourceProblems(child, p, refs)...)
				continue
			}
			switch ds := child.(type) {
			case string:
				if ds != datasourceRef {
					out = append(out, fmt.Sprintf("%s is %q, want %q", p, ds, datasourceRef))
				}
				*refs++
			case map[string]any:
				if ds["type"] == "grafana" {
					continue // the built-in annotations
				}
				if ds["uid"] != datasourceRef || ds["type"] != "prometheus" {
					out = append(out, fmt.Sprintf("%s is %v, want type prometheus, uid %q", p, ds, datasourceRef))
				}
				*refs++
			default:
				out = append(out, fmt.Sprintf("%s is %v, want the variable %q", p, ds, datasourceRef))
			}
		}
	case []any:
		for i, child := range v {
			out = append(out, datasourceProblems(child, fmt.Sprintf("%s[%d]", path, i), refs)...)
		}
	}
	return out
}

// The dashboard shows what an operator looks at: each of redlimit's
// metrics, each result an alert fires on, and decision latency as p50 and
// p99; every panel but a row has a query.
func TestDashboardShowsEachMetric(t *testing.T) {
	d, _ := readDashboard(t)
	var all strings.Builder
	for _, e := range panelExpressions(d.Panels) {
		all.WriteString(e.expr + "\n")
	}
	var noQuery func([]panel)
	noQuery = func(ps []panel) {
		for _, p := range ps {
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			noQuery(p.Panels)
		}
	}
	noQuery(d.Panels)
	for _, want := range []string{
		"redlimit_requests_total", "redlimit_decision_duration_seconds_bucket",
		"redlimit_decision_duration_seconds_count", "redlimit_store_errors_total", "redlimit_breaker_open",
		"local_allowed", "local_denied", "fail_open", "fail_closed", "denied",
		"by (kind)", "histogram_quantile(0.5,", "histogram_quantile(0.99,",
	} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("no dashboard query has %q", want)
		}
	}
}
