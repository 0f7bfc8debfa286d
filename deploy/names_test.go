package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/metrics"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/redisstore"
)

const (
	rulesFile     = "prometheus/redlimit-alerts.yml"
	rulesTestFile = "prometheus/redlimit-alerts.test.yml"
	dashboardFile = "grafana/redlimit-dashboard.json"
)

// targetLabels are added by Prometheus to every series it scrapes.
var targetLabels = []string{"job", "instance"}

// freeLabels take values the application or Prometheus chooses (policy
// names, store prefixes, targets, bucket bounds); the others take only the
// values redlimit emits.
var freeLabels = map[string]bool{"policy": true, "job": true, "instance": true, "le": true}

// outcomes and errorKinds are every value of the result and kind labels
// that redlimit emits: add a new Outcome or ErrorKind constant here.
var (
	outcomes = []string{
		middleware.OutcomeAllowed, middleware.OutcomeDenied, middleware.OutcomeShadowDenied,
		middleware.OutcomeFailOpen, middleware.OutcomeFailClosed, middleware.OutcomeLocalAllowed,
		middleware.OutcomeLocalDenied, middleware.OutcomeCacheDenied, middleware.OutcomeKeyError,
		middleware.OutcomeInvalid, middleware.OutcomeSkipped,
	}
	errorKinds = []redisstore.ErrorKind{
		redisstore.ErrorTimeout, redisstore.ErrorConnection, redisstore.ErrorScript, redisstore.ErrorOther,
	}
)

// series maps each series name to its labels and, for each label, the
// values it was seen with.
type series map[string]map[string]map[string]bool

// exported is what a fresh metrics.Metrics exports once it has heard of
// every outcome from every kind of store, every kind of store error and
// a breaker: the series a scrape shows, with their labels and values.
func exported(t *testing.T) series {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, store := range append(storeNames(t), "") {
		for _, o := range outcomes {
			m.Decision(middleware.Decision{Policy: "p", Outcome: o, Store: store})
		}
	}
	for _, k := range errorKinds {
		m.StoreError(k)
	}
	m.BreakerChanged("p", true)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := series{}
	add := func(name string, labels []*dto.LabelPair, extra ...string) {
		if out[name] == nil {
			out[name] = map[string]map[string]bool{}
			for _, l := range append(extra, targetLabels...) {
				out[name][l] = map[string]bool{}
			}
		}
		for _, lp := range labels {
			if out[name][lp.GetName()] == nil {
				out[name][lp.GetName()] = map[string]bool{}
			}
			out[name][lp.GetName()][lp.GetValue()] = true
		}
	}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			if f.GetType() == dto.MetricType_HISTOGRAM {
				add(f.GetName()+"_bucket", s.GetLabel(), "le")
				add(f.GetName()+"_count", s.GetLabel())
				add(f.GetName()+"_sum", s.GetLabel())
				continue
			}
			add(f.GetName(), s.GetLabel())
		}
	}
	return out
}

// storeNames are the values of Decision.Store the middleware reports for
// a memory store's limiter and for a limiter of its own kind, and the name
// a Redis store's limiter gives itself (asking it would dial Redis).
func storeNames(t *testing.T) []string {
	t.Helper()
	mem, err := algorithms.New(must(memstore.New()), algorithms.FixedWindow, algorithms.PerMinute(1))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	red, err := algorithms.New(must(redisstore.New(rdb)), algorithms.FixedWindow, algorithms.PerMinute(1))
	if err != nil {
		t.Fatal(err)
	}
	named, ok := red.(interface{ StoreName() string })
	if !ok {
		t.Fatal("a Redis store's limiter has no StoreName")
	}
	names := []string{named.StoreName()}
	for _, lim := range []algorithms.Limiter{mem, customLimiter{}} {
		var rec recorder
		mw, err := middleware.New(lim, middleware.WithObserver(&rec))
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "192.0.2.1:1"
		h.ServeHTTP(httptest.NewRecorder(), r)
		if len(rec.stores) != 1 {
			t.Fatalf("%T: observed %d decisions, want 1", lim, len(rec.stores))
		}
		names = append(names, rec.stores[0])
	}
	return names
}

// customLimiter admits everything; it is no limiter of package algorithms.
type customLimiter struct{}

func (customLimiter) Allow(context.Context, string, int) (algorithms.Result, error) {
	return algorithms.Result{Allowed: true, Limit: 1, Remaining: 1}, nil
}

// recorder is a middleware.Observer that keeps each decision's store.
type recorder struct{ stores []string }

func (r *recorder) Decision(d middleware.Decision) { r.stores = append(r.stores, d.Store) }
func (r *recorder) BreakerChanged(string, bool)    {}

// expression is one PromQL expression of the rules or the dashboard.
type expression struct {
	where, expr string
}

// ruleExpressions are the alert rules' expressions.
func ruleExpressions(t *testing.T) []expression {
	t.Helper()
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert, Record, Expr string
			}
		}
	}
	readYAML(t, rulesFile, &file)
	var out []expression
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			out = append(out, expression{rulesFile + ": " + r.Alert + r.Record, r.Expr})
		}
	}
	return out
}

// testSeries are the input series of the rules' unit tests, so that a
// test cannot pass on series redlimit never exports.
func testSeries(t *testing.T) []expression {
	t.Helper()
	var file struct {
		Tests []struct {
			InputSeries []struct {
				Series string
			} `yaml:"input_series"`
		}
	}
	readYAML(t, rulesTestFile, &file)
	var out []expression
	for i, tc := range file.Tests {
		for _, s := range tc.InputSeries {
			out = append(out, expression{fmt.Sprintf("%s: test %d", rulesTestFile, i+1), s.Series})
		}
	}
	return out
}

// dashboard is the parts of the dashboard's JSON the tests read.
type dashboard struct {
	Panels     []panel
	Templating struct {
		List []struct {
			Name, Type string
			Query      any
			Definition string
		}
	}
}

type panel struct {
	Title, Type string
	Panels      []panel
	Targets     []struct {
		RefID string `json:"refId"`
		Expr  string
	}
}

func readDashboard(t *testing.T) (dashboard, map[string]any) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	var raw map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d, raw
}

// panelExpressions are the dashboard panels' queries, rows' panels
// included.
func panelExpressions(panels []panel) []expression {
	var out []expression
	for _, p := range panels {
		for _, tg := range p.Targets {
			out = append(out, expression{dashboardFile + ": " + p.Title + " " + tg.RefID, tg.Expr})
		}
		out = append(out, panelExpressions(p.Panels)...)
	}
	return out
}

// labelValues matches a query variable's label_values(selector, label).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\)$`)

// variableExpressions are the dashboard's query variables as selectors,
// with the label each lists as a grouping label, so both are checked.
func variableExpressions(t *testing.T, d dashboard) []expression {
	t.Helper()
	var out []expression
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("%s: variable %s: %q is not label_values(selector, label)", dashboardFile, v.Name, v.Definition)
			continue
		}
		out = append(out, expression{dashboardFile + ": variable " + v.Name, "group by (" + m[2] + ") (" + m[1] + ")"})
	}
	return out
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// Every series the alert rules, their unit tests and the dashboard name is
// one package metrics exports, every label it carries, and every value a
// matcher names (each alternative of an a|b|c regular expression) one
// redlimit emits; grouping labels belong to some exported series. A
// misspelt name or value would make a rule that never fires and a panel
// that stays empty.
func TestExpressionsNameExportedSeries(t *testing.T) {
	exp := exported(t)
	grouping := map[string]bool{}
	for _, labels := range exp {
		for l := range labels {
			grouping[l] = true
		}
	}
	d, _ := readDashboard(t)
	all := ruleExpressions(t)
	all = append(all, testSeries(t)...)
	all = append(all, panelExpressions(d.Panels)...)
	all = append(all, variableExpressions(t, d)...)
	if len(all) < 20 {
		t.Fatalf("found only %d expressions; is a file's shape misread?", len(all))
	}
	for _, e := range all {
		u, err := scan(e.expr)
		if err != nil {
			t.Errorf("%s: %v", e.where, err)
			continue
		}
		if len(u.selectors) == 0 {
			t.Errorf("%s: no series in %q", e.where, e.expr)
		}
		for _, s := range u.selectors {
			for _, problem := range checkSelector(exp, s) {
				t.Errorf("%s: %s in %q", e.where, problem, e.expr)
			}
		}
		for _, l := range u.grouping {
			if !grouping[l] {
				t.Errorf("%s: grouping label %q is on no exported series", e.where, l)
			}
		}
	}
}

// checkSelector returns what is wrong with s against the exported series.
func checkSelector(exp series, s selector) []string {
	labels, ok := exp[s.name]
	if !ok {
		return []string{"series " + quote(s.name) + " is not exported (exported: " + strings.Join(sortedKeys(exp), ", ") + ")"}
	}
	var problems []string
	for _, m := range s.matchers {
		values, ok := labels[m.label]
		switch {
		case !ok:
			problems = append(problems, s.name+" has no label "+quote(m.label))
		case freeLabels[m.label]:
		case strings.HasSuffix(m.op, "~"):
			for _, alt := range strings.Split(m.value, "|") {
				if !values[alt] {
					problems = append(problems, s.name+"{"+m.label+m.op+quote(m.value)+"}: "+quote(alt)+" is not a value redlimit emits ("+strings.Join(sortedKeys(values), ", ")+")")
				}
			}
		case !values[m.value]:
			problems = append(problems, s.name+"{"+m.label+m.op+quote(m.value)+"}: not a value redlimit emits ("+strings.Join(sortedKeys(values), ", ")+")")
		}
	}
	return problems
}

func quote(s string) string { return `"` + s + `"` }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
