package main

import (
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/config"
)

// The sample file says what the built-in routes say: the same routes, in
// the same order, with the same policy names, algorithms, limits, key
// kinds, costs and plans.
func TestSampleEqualsBuiltin(t *testing.T) {
	c, err := config.Load("redlimit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := c.Describe()
	if len(got) != len(builtinRoutes) {
		t.Fatalf("redlimit.yaml has %d routes, the built-in set %d", len(got), len(builtinRoutes))
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], builtinRoutes[i]) {
			t.Errorf("route %d:\n redlimit.yaml %+v\n built in      %+v", i, got[i], builtinRoutes[i])
		}
	}
	if c.Redis == nil || c.Redis.URLEnv != "REDIS_URL" || c.Redis.Prefix != "redlimit-example" {
		t.Errorf("redis section %+v: want REDIS_URL and the built-in prefix", c.Redis)
	}
}

// Served, the two sets answer alike: GET / lists the same routes, and the
// first requests to each route get the same status and rate-limit headers,
// which come from the limiters the middleware holds.
func TestSampleServesLikeBuiltin(t *testing.T) {
	builtin, configured := newTestAPI(t, "builtin"), newTestAPI(t, "config")
	list := func(srv string) string {
		resp, err := http.Get(srv + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if a, b := list(builtin.URL), list(configured.URL); a != b {
		t.Fatalf("GET / differs:\n built in %s\n config   %s", a, b)
	}
	token, err := mintToken("test-secret", "alice", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	headers := map[string]string{"X-API-Key": "pro-1", "Authorization": "Bearer " + token}
	for _, rt := range builtinRoutes {
		for i := range 3 {
			a := do(t, builtin, rt.Method, rt.Path, headers)
			b := do(t, configured, rt.Method, rt.Path, headers)
			if a.StatusCode != b.StatusCode {
				t.Fatalf("%s %s request %d: status %d built in, %d from the file", rt.Method, rt.Path, i, a.StatusCode, b.StatusCode)
			}
			for _, h := range []string{"RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining"} {
				if a.Header.Get(h) != b.Header.Get(h) || a.Header.Get(h) == "" {
					t.Fatalf("%s %s request %d: %s %q built in, %q from the file", rt.Method, rt.Path, i, h, a.Header.Get(h), b.Header.Get(h))
				}
			}
		}
	}
}

// -redis and -instances would be ignored with -config, so they are refused.
func TestConfigFlagClash(t *testing.T) {
	for _, args := range [][]string{
		{"-config", "redlimit.yaml", "-redis", "redis://127.0.0.1:1/0"},
		{"-instances", "3", "-config", "redlimit.yaml"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil || !strings.Contains(err.Error(), "does not apply with -config") {
			t.Errorf("%v: %v", args, err)
		}
	}
	if _, err := parseFlags([]string{"-config", "redlimit.yaml"}, io.Discard); err != nil {
		t.Errorf("-config alone: %v", err)
	}
}
