package deploy

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The tests in this package read the expressions of the alert rules and
// the dashboard to check the series and labels they name against what
// package metrics exports. A scanner of the little PromQL they use is
// enough, and keeps Prometheus's own parser (and its dependencies) out of
// the module.

// selector is one series selector in an expression: the series name, ""
// for a bare {...}, and its label matchers.
type selector struct {
	name     string
	matchers []matcher
}

// matcher is one label matcher: label, op ("=", "!=", "=~" or "!~") and
// the value as written, unquoted.
type matcher struct {
	label, op, value string
}

// uses is what an expression names: its selectors, and the labels of its
// by, without, on and ignoring clauses.
type uses struct {
	selectors []selector
	grouping  []string
}

// keywords are PromQL words that are not series: operators, and the
// aggregations, whose by or without may come before their parenthesis.
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"group_left": true, "group_right": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true,
	"stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
}

// labelLists are the keywords followed by a parenthesised list of labels.
var labelLists = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// scan returns what expr names. Grafana variables ($name, ${name}) are
// skipped where they stand for a duration and kept inside label values.
func scan(expr string) (uses, error) {
	var u uses
	s := expr
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			_, n, err := quoted(s[i:])
			if err != nil {
				return u, err
			}
			i += n
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '$':
			i += len(variable(s[i:]))
		case isDigit(c) || c == '.':
			for i < len(s) && (isIdent(s[i]) || s[i] == '.') {
				i++
			}
		case c == '{':
			sel, n, err := matchers(s[i:])
			if err != nil {
				return u, err
			}
			u.selectors = append(u.selectors, sel)
			i += n
		case isIdentStart(c):
			word := ident(s[i:])
			i += len(word)
			j := skipSpace(s, i)
			next := byte(0)
			if j < len(s) {
				next = s[j]
			}
			lower := strings.ToLower(word)
			switch {
			case labelLists[lower] && next == '(':
				end := strings.IndexByte(s[j:], ')')
				if end < 0 {
					return u, fmt.Errorf("unclosed %s ( in %q", word, expr)
				}
				for _, l := range strings.Split(s[j+1:j+end], ",") {
					if l = strings.TrimSpace(l); l != "" {
						u.grouping = append(u.grouping, l)
					}
				}
				i = j + end + 1
			case keywords[lower], next == '(':
				// an operator word, or a function or aggregation's name
			default:
				sel := selector{name: word}
				if next == '{' {
					m, n, err := matchers(s[j:])
					if err != nil {
						return u, err
					}
					sel.matchers, i = m.matchers, j+n
				}
				u.selectors = append(u.selectors, sel)
			}
		default:
			i++
		}
	}
	return u, nil
}

// matchers reads the {...} at the start of s.
func matchers(s string) (selector, int, error) {
	var sel selector
	i := 1
	for {
		for i < len(s) && (s[i] == ',' || s[i] == ' ' || s[i] == '\n' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			return sel, 0, fmt.Errorf("unclosed { in %q", s)
		}
		if s[i] == '}' {
			return sel, i + 1, nil
		}
		label := ident(s[i:])
		if label == "" {
			return sel, 0, fmt.Errorf("no label name at %q", s[i:])
		}
		i = skipSpace(s, i+len(label))
		op := ""
		for _, o := range []string{"=~", "!~", "!=", "="} {
			if strings.HasPrefix(s[i:], o) {
				op = o
				break
			}
		}
		if op == "" {
			return sel, 0, fmt.Errorf("no matcher after %s at %q", label, s[i:])
		}
		i = skipSpace(s, i+len(op))
		value, n, err := quoted(s[i:])
		if err != nil {
			return sel, 0, err
		}
		sel.matchers = append(sel.matchers, matcher{label, op, value})
		i += n
	}
}

// quoted reads the string literal at the start of s: its value and length.
func quoted(s string) (string, int, error) {
	if s == "" {
		return "", 0, fmt.Errorf("no string")
	}
	q := s[0]
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '\\' && q != '`':
			i++
		case s[i] == q:
			lit := s[:i+1]
			if q == '\'' {
				lit = `"` + strings.ReplaceAll(s[1:i], `"`, `\"`) + `"`
			}
			v, err := strconv.Unquote(lit)
			return v, i + 1, err
		}
	}
	return "", 0, fmt.Errorf("unclosed string %q", s)
}

// variable returns the Grafana variable at the start of s: $name or ${name}.
func variable(s string) string {
	if strings.HasPrefix(s, "${") {
		if end := strings.IndexByte(s, '}'); end > 0 {
			return s[:end+1]
		}
	}
	return "$" + ident(s[1:])
}

func ident(s string) string {
	if s == "" || !isIdentStart(s[0]) {
		return ""
	}
	i := 1
	for i < len(s) && isIdent(s[i]) {
		i++
	}
	return s[:i]
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t') {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
func isIdent(c byte) bool { return isIdentStart(c) || isDigit(c) }

// The scanner finds every selector, matcher and grouping label in the
// shapes the rules and the dashboard use, and nothing else.
func TestScan(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want uses
	}{
		{`redlimit_breaker_open > 0`, uses{selectors: []selector{{name: "redlimit_breaker_open"}}}},
		{
			"sum without (result) (rate(a_total{result=\"fail_closed\"}[5m]))\n  /\nsum without (result) (rate(a_total{result!~'skipped|x'}[$__rate_interval])) > 0.01",
			uses{
				selectors: []selector{
					{name: "a_total", matchers: []matcher{{"result", "=", "fail_closed"}}},
					{name: "a_total", matchers: []matcher{{"result", "!~", "skipped|x"}}},
				},
				grouping: []string{"result", "result"},
			},
		},
		{
			`histogram_quantile(0.99, sum by (le, store) (rate(h_bucket{job=~"$job", instance=~"${instance}"}[$__range])))`,
			uses{
				selectors: []selector{{name: "h_bucket", matchers: []matcher{{"job", "=~", "$job"}, {"instance", "=~", "${instance}"}}}},
				grouping:  []string{"le", "store"},
			},
		},
		{
			`a and on (instance) b unless ignoring(kind) {__name__="c"} or bool d offset 5m`,
			uses{
				selectors: []selector{{name: "a"}, {name: "b"}, {matchers: []matcher{{"__name__", "=", "c"}}}, {name: "d"}},
				grouping:  []string{"instance", "kind"},
			},
		},
		{`label_replace(x, "dst", "$1", "src", "(.*)")`, uses{selectors: []selector{{name: "x"}}}},
	} {
		got, err := scan(tc.expr)
		if err != nil {
			t.Errorf("scan(%q): %v", tc.expr, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("scan(%q)\n got %+v\nwant %+v", tc.expr, got, tc.want)
		}
	}
	for _, bad := range []string{`a{b="c"`, `a{b~"c"}`, `a{b="c}`, `sum by (a`} {
		if _, err := scan(bad); err == nil {
			t.Errorf("scan(%q) succeeded, want an error", bad)
		}
	}
}
