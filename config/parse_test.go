package config

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// valid is a file that uses every field.
const valid = `redis:
  url: redis://127.0.0.1:6390/2
  username: app
  password_env: REDLIMIT_TEST_PASSWORD
  tls: {ca_file: ca.pem, cert_file: client.pem, key_file: client.key, server_name: redis.internal}
  dial_timeout: 1s
  read_timeout: 500ms
  write_timeout: 500ms
  pool_size: 20
  prefix: app
  timeout: 50ms
  failure_mode: closed
  instances: 3
  denial_cache: 0
memory:
  max_keys: 2048
failure_policy: open
trusted_proxies: [10.0.0.0/8, "fd00::/8", 192.168.1.1]
shadow: true
skip:
  networks: [198.51.100.0/24]
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
    key: {kind: api_key, header: X-Key, known_keys: customers}
    cost: 2
    shadow: false
  plan:
    algorithm: fixed_window
    limits: [{rate: 5, period: 1m}]
    key: {kind: func, name: jwt}
    plan_resolver: by_key
    plans:
      pro:
        limits: [{rate: 100, period: 1m}]
      bulk:
        algorithm: token_bucket
        limits: [{rate: 1_000, period: 1h, burst: 50}]
  v6:
    algorithm: leaky_bucket
    limits: [{rate: 2, period: 1s}]
    key: {kind: ip, ipv6_prefix: 48}
routes:
  - {method: GET, path: /api/search, policy: search}
  - {method: GET, path: /api/reports, policy: reports}
  - {method: POST, path: "/api/plan/{id}", policy: plan}
  - {method: GET, path: /api/v6, policy: v6}
`

func TestParseValid(t *testing.T) {
	c, err := Parse([]byte(valid), "valid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	denials := 0
	wantRedis := &Redis{URL: "redis://127.0.0.1:6390/2", Username: "app", PasswordEnv: "REDLIMIT_TEST_PASSWORD",
		TLS:         &TLS{CAFile: "ca.pem", CertFile: "client.pem", KeyFile: "client.key", ServerName: "redis.internal"},
		DialTimeout: time.Second,
		ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, PoolSize: 20,
		Prefix: "app", Timeout: 50 * time.Millisecond, FailureMode: "closed", Instances: 3, DenialCache: &denials,
		at: position{2, "redis"}}
	if !reflect.DeepEqual(c.Redis, wantRedis) {
		t.Errorf("redis %+v, want %+v", c.Redis, wantRedis)
	}
	if c.Memory.MaxKeys != 2048 || c.FailurePolicy != "open" || !c.Shadow {
		t.Errorf("memory %+v, failure policy %q, shadow %v", c.Memory, c.FailurePolicy, c.Shadow)
	}
	wantProxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8"), netip.MustParsePrefix("192.168.1.1/32")}
	if !reflect.DeepEqual(c.TrustedProxies, wantProxies) || len(c.Skip) != 1 {
		t.Errorf("trusted %v, skip %v", c.TrustedProxies, c.Skip)
	}
	want := []RouteInfo{
		{Method: "GET", Path: "/api/search", Policy: "search", Algorithm: algorithms.SlidingWindowCounter,
			Limits: []algorithms.Limit{algorithms.PerSecond(5), algorithms.PerMinute(100)}, Key: "ip", Cost: 1, Shadow: true},
		{Method: "GET", Path: "/api/reports", Policy: "reports", Algorithm: algorithms.TokenBucket,
			Limits: []algorithms.Limit{algorithms.PerMinute(30).WithBurst(5)}, Key: "api_key", Cost: 2},
		{Method: "POST", Path: "/api/plan/{id}", Policy: "plan", Algorithm: algorithms.FixedWindow,
			Limits: []algorithms.Limit{algorithms.PerMinute(5)}, Key: "jwt", Cost: 1, Shadow: true,
			Plans: map[string]Plan{
				"pro":  {Algorithm: algorithms.FixedWindow, Limits: []algorithms.Limit{algorithms.PerMinute(100)}},
				"bulk": {Algorithm: algorithms.TokenBucket, Limits: []algorithms.Limit{algorithms.PerHour(1000).WithBurst(50)}},
			}},
		{Method: "GET", Path: "/api/v6", Policy: "v6", Algorithm: algorithms.LeakyBucket,
			Limits: []algorithms.Limit{algorithms.PerSecond(2)}, Key: "ip", Cost: 1, Shadow: true},
	}
	if got := c.Describe(); !reflect.DeepEqual(got, want) {
		t.Errorf("Describe:\n got %+v\nwant %+v", got, want)
	}
	if k := c.Policies["reports"].Key; k.Header != "X-Key" || k.KnownKeys != "customers" {
		t.Errorf("reports key %+v", k)
	}
	if k := c.Policies["v6"].Key; k.IPv6Prefix != 48 {
		t.Errorf("v6 key %+v", k)
	}
	if c.Policies["plan"].PlanResolver != "by_key" {
		t.Errorf("plan resolver %q", c.Policies["plan"].PlanResolver)
	}
}

// minimal wraps policy lines (indented under a policy "p") into a file
// with one route, so each case shows only what it tests. Line 4 is the
// policy's first line.
func minimal(policy string) string {
	return "policies:\n  p:\n    key: ip\n" + policy + "routes:\n  - {method: GET, path: /x, policy: p}\n"
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string // each must appear in the error
	}{
		{"empty file", "", []string{"t.yaml:1: empty file"}},
		{"not a mapping", "- a\n", []string{"t.yaml:1: want a mapping, got a list"}},
		{"syntax", "policies: [\n", []string{"t.yaml: yaml:"}},
		{"two documents", minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n") + "---\na: 1\n",
			[]string{"t.yaml:8: more than one YAML document"}},
		{"unknown top-level field", "polices: {}\n" + minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"),
			[]string{"t.yaml:1: polices: unknown field"}},
		{"missing policies and routes", "shadow: true\n",
			[]string{"t.yaml:1: policies: missing", "t.yaml:1: routes: missing"}},
		{"unknown policy field", minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n    burst: 3\n"),
			[]string{"t.yaml:6: policies.p.burst: unknown field"}},
		{"bad period", minimal("    algorithm: fixed_window\n    limits:\n      - {rate: 5, period: 1s}\n      - {rate: 10, period: soon}\n"),
			[]string{`t.yaml:7: policies.p.limits[1].period: want a duration such as 100ms, 1s or 1m, got "soon"`}},
		{"zero period", minimal("    algorithm: fixed_window\n    limits:\n      - {rate: 5, period: 0s}\n"),
			[]string{"t.yaml:6: policies.p.limits[0].period: 0s is not positive"}},
		{"negative rate", minimal("    algorithm: fixed_window\n    limits:\n      - {rate: -1, period: 1s}\n"),
			[]string{"t.yaml:6: policies.p.limits[0].rate: -1 is outside 1.."}},
		{"rate as text", minimal("    algorithm: fixed_window\n    limits:\n      - {rate: \"5\", period: 1s}\n"),
			[]string{`t.yaml:6: policies.p.limits[0].rate: want an integer, got "5"`}},
		{"missing rate", minimal("    algorithm: fixed_window\n    limits:\n      - {period: 1s}\n"),
			[]string{"t.yaml:6: policies.p.limits[0].rate: missing"}},
		{"unknown limit field", minimal("    algorithm: fixed_window\n    limits:\n      - {rate: 1, period: 1s, per: 1m}\n"),
			[]string{"t.yaml:6: policies.p.limits[0].per: unknown field"}},
		{"burst on a window", minimal("    algorithm: fixed_window\n    limits:\n      - {rate: 1, period: 1s, burst: 3}\n"),
			[]string{"t.yaml:6: policies.p.limits[0].burst: fixed_window has no burst"}},
		{"unknown algorithm", minimal("    algorithm: sliding_windows\n    limits: [{rate: 1, period: 1s}]\n"),
			[]string{`t.yaml:4: policies.p.algorithm: "sliding_windows" is not one of fixed_window`}},
		{"missing algorithm", minimal("    limits: [{rate: 1, period: 1s}]\n"),
			[]string{"policies.p.algorithm: missing"}},
		{"missing limits", minimal("    algorithm: fixed_window\n"), []string{"policies.p.limits: missing"}},
		{"empty limits", minimal("    algorithm: fixed_window\n    limits: []\n"), []string{"t.yaml:5: policies.p.limits: empty"}},
		{"limits not a list", minimal("    algorithm: fixed_window\n    limits: {rate: 1, period: 1s}\n"),
			[]string{"t.yaml:5: policies.p.limits: want a list, got a mapping"}},
		{"same limit twice", minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}, {rate: 1, period: 1s}]\n"),
			[]string{"t.yaml:5: policies.p.limits: ", "given twice"}},
		{"log rate too high", minimal("    algorithm: sliding_window_log\n    limits: [{rate: 20000, period: 1s}]\n"),
			[]string{"t.yaml:5: policies.p.limits[0]: "}},
		{"period too long", minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 9000h}]\n"),
			[]string{"t.yaml:5: policies.p.limits[0]: "}},
		{"cost above quota", minimal("    algorithm: token_bucket\n    limits: [{rate: 20, period: 1m, burst: 4}]\n    cost: 5\n"),
			[]string{"t.yaml:6: policies.p.cost: cost 5 exceeds the quota 4 of limit 0"}},
		{"delay on a window", minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n    delay: 100ms\n"),
			[]string{"t.yaml:6: policies.p.delay: only token_bucket and leaky_bucket can delay a request"}},
		{"delay too long", minimal("    algorithm: leaky_bucket\n    limits: [{rate: 1, period: 1s}]\n    delay: 2h\n"),
			[]string{"t.yaml:6: policies.p.delay: must be above 0 and at most 1h0m0s"}},
		{"cost zero", minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n    cost: 0\n"),
			[]string{"t.yaml:6: policies.p.cost: 0 is outside 1.."}},
		{"bad policy name", strings.Replace(minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"), "  p:", "  \"a b\":", 1),
			[]string{`t.yaml:2: policies.a b: a policy name is`}},
		{"policy given twice", "policies:\n  p:\n    key: ip\n    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n  p: {}\nroutes: []\n",
			[]string{"t.yaml:6: policies.p: given twice"}},
		{"key scalar other than ip", strings.Replace(minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"), "key: ip", "key: jwt", 1),
			[]string{`t.yaml:3: policies.p.key: "jwt": only ip may be written alone`}},
		{"api key without known keys", strings.Replace(minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"), "key: ip", "key: {kind: api_key}", 1),
			[]string{"t.yaml:3: policies.p.key.known_keys: missing"}},
		{"key kind missing", strings.Replace(minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"), "key: ip", "key: {name: jwt}", 1),
			[]string{"t.yaml:3: policies.p.key.kind: missing"}},
		{"key field of another kind", strings.Replace(minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"), "key: ip", "key: {kind: ip, header: X-A}", 1),
			[]string{"t.yaml:3: policies.p.key.header: does not apply to kind ip"}},
		{"ipv6 prefix too long", strings.Replace(minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"), "key: ip", "key: {kind: ip, ipv6_prefix: 129}", 1),
			[]string{"t.yaml:3: policies.p.key.ipv6_prefix: 129 is outside 32..128"}},
		{"ipv6 prefix 0, every IPv6 client in one bucket", strings.Replace(minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"), "key: ip", "key: {kind: ip, ipv6_prefix: 0}", 1),
			[]string{"t.yaml:3: policies.p.key.ipv6_prefix: 0 is outside 32..128"}},
		{"ipv6 prefix too short", strings.Replace(minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"), "key: ip", "key: {kind: ip, ipv6_prefix: 31}", 1),
			[]string{"t.yaml:3: policies.p.key.ipv6_prefix: 31 is outside 32..128"}},
		{"bad header name", strings.Replace(minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"), "key: ip", `key: {kind: api_key, header: "X Key", known_keys: k}`, 1),
			[]string{`t.yaml:3: policies.p.key.header: "X Key" is not a header name`}},
		{"plans without resolver", minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n    plans: {pro: {limits: [{rate: 2, period: 1s}]}}\n"),
			[]string{"t.yaml:6: policies.p.plan_resolver: missing"}},
		{"plans empty", minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n    plan_resolver: r\n    plans: {}\n"),
			[]string{"t.yaml:7: policies.p.plans: empty"}},
		{"resolver without plans", minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n    plan_resolver: r\n"),
			[]string{"policies.p.plans: missing: a plan resolver without plans"}},
		{"plan with bad limit", minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n    plan_resolver: r\n    plans:\n      pro:\n        limits: [{rate: 2, period: 1y}]\n"),
			[]string{`t.yaml:9: policies.p.plans.pro.limits[0].period: want a duration`}},
		{"route to unknown policy", minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n") + "  - {method: GET, path: /y, policy: q}\n",
			[]string{`t.yaml:8: routes[1].policy: no policy "q"`}},
		{"route twice", minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n") + "  - {method: GET, path: /x, policy: p}\n",
			[]string{"t.yaml:8: routes[1]: GET /x is given twice"}},
		{"route bad method", minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n") + "  - {method: get, path: /y, policy: p}\n",
			[]string{`t.yaml:8: routes[1].method: "get" is not one of GET`}},
		{"route path without slash", minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n") + "  - {method: GET, path: y, policy: p}\n",
			[]string{`t.yaml:8: routes[1].path: "y": a chi pattern starts with /`}},
		{"route pattern chi refuses", minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n") + "  - {method: GET, path: \"/a/{id\", policy: p}\n",
			[]string{`t.yaml:8: routes[1].path: "/a/{id": not a chi pattern`}},
		{"route wildcard not at the end", minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n") + "  - {method: GET, path: \"/a/*/b\", policy: p}\n",
			[]string{`t.yaml:8: routes[1].path: "/a/*/b": not a chi pattern`}},
		{"route missing path", minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n") + "  - {method: GET, policy: p}\n",
			[]string{"t.yaml:8: routes[1].path: missing"}},
		{"trusted proxy /0", "trusted_proxies: [0.0.0.0/0]\n" + minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"),
			[]string{"t.yaml:1: trusted_proxies[0]: 0.0.0.0/0 holds every address"}},
		{"skip not a prefix", "skip:\n  networks: [office]\n" + minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"),
			[]string{`t.yaml:2: skip.networks[0]: want a CIDR prefix`}},
		{"skip all of IPv6", "skip:\n  networks: [\"::/0\"]\n" + minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"),
			[]string{`t.yaml:2: skip.networks[0]: ::/0 holds every address`}},
		{"shadow not a bool", "shadow: yes\n" + minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"),
			[]string{`t.yaml:1: shadow: want true or false, got "yes"`}},
		{"failure policy", "failure_policy: local\n" + minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"),
			[]string{`t.yaml:1: failure_policy: "local" is not one of closed, open`}},
		{"redis bad scheme", "redis: {url: \"http://a:6379\"}\n" + minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"),
			[]string{"t.yaml:1: redis.url: not a valid Redis URL (the scheme is not redis, rediss or unix"}},
		{"redis bad prefix", "redis: {url: \"redis://a:6379\", prefix: \"a{b}\"}\n" + minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"),
			[]string{"t.yaml:1: redis.prefix: must be 1 to 64 bytes without braces"}},
		{"redis bad timeout", "redis:\n  url: redis://a:6379\n  timeout: -1s\n" + minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"),
			[]string{"t.yaml:3: redis.timeout: -1s is not positive"}},
		{"redis pool zero", "redis:\n  url: redis://a:6379\n  pool_size: 0\n" + minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"),
			[]string{"t.yaml:3: redis.pool_size: 0 is outside 1.."}},
		{"memory bound too small", "memory: {max_keys: 10}\n" + minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"),
			[]string{"t.yaml:1: memory.max_keys: 10 is outside 1024.."}},
		{"anchors refused", "policies:\n  p: &base\n    key: ip\n    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n  q: *base\nroutes: []\n",
			[]string{"t.yaml:2: YAML anchors and aliases are not supported"}},
		{"key empty", strings.Replace(minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"), "key: ip", "key:", 1),
			[]string{"t.yaml:3: policies.p.key: missing"}},
		{"no policies", "policies: {}\nroutes: []\n", []string{"t.yaml:1: policies: empty", "t.yaml:2: routes: empty"}},
		{"several errors at once", minimal("    algorithm: fixed_window\n    limits: [{rate: 0, period: 1s}]\n    cost: 0\n"),
			[]string{"t.yaml:5: policies.p.limits[0].rate:", "t.yaml:6: policies.p.cost:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.file), "t.yaml")
			if err == nil {
				t.Fatalf("parsed %+v, want an error", c)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\nlacks %q", err, w)
				}
			}
		})
	}
}

// A Redis URL that does not parse is reported without its text, which may
// hold a password.
func TestParseHidesRedisPassword(t *testing.T) {
	file := "redis: {url: \"redis://:hunter2@[::1\"}\n" + minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n")
	_, err := Parse([]byte(file), "t.yaml")
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "t.yaml:1: redis.url: not a valid Redis URL (userinfo, host or path could not be parsed") {
		t.Fatalf("error %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "limits.yaml")
	if err := os.WriteFile(path, []byte(valid), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil || c.Name != "limits.yaml" || len(c.Routes) != 4 {
		t.Fatalf("Load: %+v, %v", c, err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, ErrInvalid) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", MaxFileSize)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "big.yaml:1: larger than") {
		t.Fatalf("big file: %v", err)
	}
}
