package keyfunc

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
)

func constKey(k string) KeyFunc { return func(*http.Request) (string, error) { return k, nil } }

func TestFirstOfSkipsEmptyKey(t *testing.T) {
	got, err := FirstOf(constKey(""), constKey("x:1"))(newRequest("", nil))
	if err != nil || got != "x:1" {
		t.Errorf("FirstOf() = %q, %v; want x:1", got, err)
	}
}

func TestJoin(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/search", nil)
	r.RemoteAddr = "203.0.113.7:1"
	got, err := Join(Method, Route, IP())(r)
	if want := "method:POST|path:/search|ip:203.0.113.7"; err != nil || got != want {
		t.Errorf("Join() = %q, %v; want %q", got, err, want)
	}

	r.RemoteAddr = "bogus"
	if got, err := Join(Route, IP())(r); !errors.Is(err, ErrNoClientIP) || got != "" {
		t.Errorf("Join() with failing part = %q, %v; want ErrNoClientIP", got, err)
	}
	if got, err := Join(Route, constKey(""))(r); !errors.Is(err, ErrEmptyKey) || got != "" {
		t.Errorf("Join() with empty part = %q, %v; want ErrEmptyKey", got, err)
	}
}

// TestJoinEscapes checks that parts holding the separator cannot make two
// different splits produce one key.
func TestJoinEscapes(t *testing.T) {
	r := newRequest("", nil)
	pairs := [][2]string{
		{"a|b", "c"}, {"a", "b|c"}, {"a%7Cb", "c"}, {"a%b", "c"}, {"a%25b", "c"}, {"a|", "|c"},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		got, err := Join(constKey(p[0]), constKey(p[1]))(r)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(got, Separator); n != 1 {
			t.Errorf("Join(%q, %q) = %q has %d separators, want 1", p[0], p[1], got, n)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("Join(%q) and Join(%q) both gave %q", prev, p, got)
		}
		seen[got] = p
	}
}

func TestCombinatorsInvalid(t *testing.T) {
	r := newRequest("203.0.113.7:1", nil)
	for name, kf := range map[string]KeyFunc{
		"FirstOf()":    FirstOf(),
		"FirstOf(nil)": FirstOf(IP(), nil),
		"Join()":       Join(),
		"Join(nil)":    Join(nil, IP()),
	} {
		if got, err := kf(r); !errors.Is(err, algorithms.ErrInvalidOption) || got != "" {
			t.Errorf("%s = %q, %v; want algorithms.ErrInvalidOption", name, got, err)
		}
	}
}

// TestCombinatorsCopyArgs checks that reusing the argument slice later
// does not change a built KeyFunc.
func TestCombinatorsCopyArgs(t *testing.T) {
	fns := []KeyFunc{constKey("a:1"), constKey("b:2")}
	first, join := FirstOf(fns...), Join(fns...)
	fns[0] = constKey("z:9")
	r := newRequest("", nil)
	if got, _ := first(r); got != "a:1" {
		t.Errorf("FirstOf() = %q after the slice changed, want a:1", got)
	}
	if got, _ := join(r); got != "a:1|b:2" {
		t.Errorf("Join() = %q after the slice changed, want a:1|b:2", got)
	}
}

// TestNamespaces checks that every key function keeps to its own
// namespace and never emits the separator or its escape, whatever the
// request holds.
func TestNamespaces(t *testing.T) {
	odd := []string{"", "a|b", "a%b", "#x", "ip:1.2.3.4", "key:abc", strings.Repeat("é", 300), "sub:alice", "\x00\xff"}
	fns := map[string]KeyFunc{
		"ip:":     IP(IPv6Prefix(128)),
		"key:":    APIKey("X-API-Key"),
		"method:": Method,
	}
	seen := map[string]string{}
	record := func(ns, key string) {
		t.Helper()
		if !strings.HasPrefix(key, ns) {
			t.Errorf("%s key %q outside its namespace", ns, key)
		}
		if strings.ContainsAny(key, "|%") {
			t.Errorf("%s key %q holds '|' or '%%'", ns, key)
		}
		if prev, dup := seen[key]; dup && prev != ns {
			t.Errorf("key %q made by both %s and %s", key, prev, ns)
		}
		seen[key] = ns
	}
	for _, s := range odd {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "[2001:db8::1]:1"
		r.Method = s
		r.URL.Path = s
		r.Header.Set("X-API-Key", s)
		for ns, kf := range fns {
			if key, err := kf(r); err == nil {
				record(ns, key)
			}
		}
		key, _ := Route(r)
		record("path:", key)
	}
	if len(seen) < 2*len(odd) {
		t.Errorf("only %d distinct keys from %d requests", len(seen), len(odd))
	}
}
