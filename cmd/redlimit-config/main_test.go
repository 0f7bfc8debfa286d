package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/internal/redisurl/redisurltest"
)

const good = `redis:
  # ports nobody listens on: -store builds the store, which dials them
  sentinel: {master_name: main, addrs: ["127.0.0.1:1", "127.0.0.1:2"]}
  password_env: RL_CMD_TEST_PW
policies:
  search:
    algorithm: sliding_window_counter
    limits:
      - {rate: 5, period: 1s}
      - {rate: 100, period: 1m}
    key: ip
  reports:
    algorithm: token_bucket
    limits: [{rate: 30, period: 1m, burst: 5}]
    key: {kind: api_key, known_keys: customers}
    cost: 2
    plan_resolver: by_key
    plans:
      pro: {limits: [{rate: 300, period: 1h}]}
  me:
    algorithm: leaky_bucket
    limits: [{rate: 10, period: 1s}]
    key: {kind: func, name: user}
    delay: 200ms
    shadow: true
routes:
  - {method: GET, path: /api/search, policy: search}
  - {method: GET, path: /api/reports, policy: reports}
  - {method: GET, path: /api/me, policy: me}
`

// A route's rate beyond the table's range and an unknown algorithm.
const bad = `policies:
  search:
    algorithm: sliding_window
    limits: [{rate: 2000000000, period: 1s}]
    key: ip
routes:
  - {method: GET, path: /api/search, policy: search}
`

func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	goodPath, badPath := write("good.yaml", good), write("bad.yaml", bad)
	tests := []struct {
		name        string
		env         string // RL_CMD_TEST_PW
		args        []string
		status      int
		stdout      []string
		stderr      []string
		notAnyWhere string
	}{
		{"a valid file", "", []string{goodPath}, 0,
			[]string{goodPath + ": valid", "store: Redis Sentinel master main via 127.0.0.1:1, 127.0.0.1:2 db 0",
				"GET /api/search", "sliding_window_counter 5/1s, 100/1m, key ip",
				"token_bucket 30/1m burst 5, key api_key, cost 2", "plan pro", "token_bucket 300/1h",
				"leaky_bucket 10/1s, key user, delay up to 200ms, shadow"}, nil, ""},
		{"an invalid file", "", []string{badPath}, 1, nil,
			[]string{badPath + ": invalid", `bad.yaml:3: policies.search.algorithm: "sliding_window" is not one of`,
				"bad.yaml:4: policies.search.limits[0].rate: 2000000000 is outside 1..1000000000"}, ""},
		{"a valid and an invalid file", "", []string{goodPath, badPath}, 1, []string{goodPath + ": valid"}, []string{badPath + ": invalid"}, ""},
		{"a missing file", "", []string{filepath.Join(dir, "missing.yaml")}, 1, nil, []string{"no such file"}, ""},
		{"-store without the password", "", []string{"-store", goodPath}, 1, nil,
			[]string{"good.yaml:4: redis.password_env: the environment variable RL_CMD_TEST_PW is unset or empty"}, ""},
		{"-store with the password", "cmd-test-secret", []string{"-store", goodPath}, 0,
			[]string{"store: Redis Sentinel master main via 127.0.0.1:1, 127.0.0.1:2 db 0"}, nil, "cmd-test-secret"},
		{"no file", "", nil, 2, nil, []string{"usage: redlimit-config"}, ""},
		{"an unknown flag", "", []string{"-x", goodPath}, 2, nil, []string{"flag provided but not defined: -x"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("RL_CMD_TEST_PW", tt.env)
			var stdout, stderr bytes.Buffer
			if got := run(tt.args, &stdout, &stderr); got != tt.status {
				t.Errorf("status %d, want %d\nstdout:\n%s\nstderr:\n%s", got, tt.status, &stdout, &stderr)
			}
			for _, w := range tt.stdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout\n%s\nlacks %q", &stdout, w)
				}
			}
			for _, w := range tt.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr\n%s\nlacks %q", &stderr, w)
				}
			}
			if tt.notAnyWhere != "" && strings.Contains(stdout.String()+stderr.String(), tt.notAnyWhere) {
				t.Errorf("the output repeats %q", tt.notAnyWhere)
			}
		})
	}
}

// With -store, a Redis URL that go-redis would refuse (or read as another
// URL) makes the file invalid, and nothing printed repeats the password,
// three characters of it, the user or the host.
func TestRunNeverRepeatsRedisURL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "url.yaml")
	file := "redis:\n  url_env: RL_CMD_TEST_URL\npolicies:\n  search:\n    algorithm: fixed_window\n" +
		"    limits: [{rate: 5, period: 1s}]\n    key: ip\nroutes:\n  - {method: GET, path: /api/search, policy: search}\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range redisurltest.Malformed {
		t.Run(tt.Name, func(t *testing.T) {
			t.Setenv("RL_CMD_TEST_URL", tt.URL)
			var stdout, stderr bytes.Buffer
			if got := run([]string{"-store", path}, &stdout, &stderr); got != 1 {
				t.Errorf("status %d, want 1\nstdout:\n%s\nstderr:\n%s", got, &stdout, &stderr)
			}
			want := "url.yaml: redis.url_env (RL_CMD_TEST_URL): not a valid Redis URL (" + tt.Want
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr\n%s\nlacks %q", &stderr, want)
			}
			// The temporary directory's random name is not the URL's.
			out := strings.ReplaceAll(stdout.String()+stderr.String(), path, "url.yaml")
			if l := tt.Leak(out); l != "" {
				t.Errorf("the output repeats %q:\n%s%s", l, &stdout, &stderr)
			}
		})
	}
}
