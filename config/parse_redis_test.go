package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// The redis section reaches a standalone server, a Sentinel-watched master
// or a Cluster, or leaves the connection to code.
func TestParseRedisConnections(t *testing.T) {
	tests := []struct {
		name    string
		section string
		want    Redis // at, FailureMode and Instances filled in by the test
		store   string
	}{
		{"addr with credentials and db", "redis:\n  addr: redis.internal:6379\n  username: app\n  password_env: RL_PW\n  db: 4\n",
			Redis{Addr: "redis.internal:6379", Username: "app", PasswordEnv: "RL_PW", DB: 4}, "Redis at redis.internal:6379 db 4"},
		{"sentinel", "redis:\n  sentinel:\n    master_name: main\n    addrs: [\"10.0.0.1:26379\", \"10.0.0.2:26379\"]\n    password_env: RL_SENTINEL_PW\n  password_env: RL_PW\n  db: 1\n",
			Redis{Sentinel: &Sentinel{MasterName: "main", Addrs: []string{"10.0.0.1:26379", "10.0.0.2:26379"}, PasswordEnv: "RL_SENTINEL_PW"}, PasswordEnv: "RL_PW", DB: 1},
			"Redis Sentinel master main via 10.0.0.1:26379, 10.0.0.2:26379 db 1"},
		{"cluster over TLS", "redis:\n  cluster: {addrs: [\"n1:7000\", \"[::1]:7001\"]}\n  tls: {ca_file: /etc/ca.pem, server_name: redis}\n",
			Redis{Cluster: &Cluster{Addrs: []string{"n1:7000", "[::1]:7001"}}, TLS: &TLS{CAFile: "/etc/ca.pem", ServerName: "redis"}},
			"Redis Cluster via n1:7000, [::1]:7001 over TLS"},
		{"tls alone", "redis:\n  addr: r:6380\n  tls:\n",
			Redis{Addr: "r:6380", TLS: &TLS{}}, "Redis at r:6380 db 0 over TLS"},
		{"rediss URL", "redis:\n  url: rediss://r:6380/2\n", Redis{URL: "rediss://r:6380/2"}, "Redis at r:6380 db 2 over TLS"},
		{"url_env", "redis:\n  url_env: RL_URL\n", Redis{URLEnv: "RL_URL"}, "Redis at the URL in $RL_URL, else memory"},
		{"no connection: the application's client", "redis:\n  prefix: app\n", Redis{Prefix: "app"}, "Redis through the application's client"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.section+okPolicy), "t.yaml")
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.FailureMode, want.Instances, want.at = "local", 1, position{2, "redis"}
			if !reflect.DeepEqual(c.Redis, &want) {
				t.Errorf("redis\n%+v, want\n%+v", c.Redis, &want)
			}
			if got := c.DescribeStore(); got != tt.store {
				t.Errorf("DescribeStore() %q, want %q", got, tt.store)
			}
		})
	}
}

func TestParseRedisErrors(t *testing.T) {
	tests := []struct {
		name    string
		section string
		want    string
	}{
		{"two connections", "redis:\n  addr: a:6379\n  cluster: {addrs: [\"b:7000\"]}\n",
			"t.yaml:2: redis: give one of url, url_env, addr, sentinel, cluster, not addr and cluster"},
		{"password in the file", "redis:\n  addr: a:6379\n  password: hunter2\n",
			"t.yaml:3: redis.password: a password never goes in the file: name the environment variable holding it with password_env"},
		{"sentinel password in the file", "redis:\n  sentinel: {master_name: m, addrs: [\"a:26379\"], password: hunter2}\n",
			"t.yaml:2: redis.sentinel.password: a password never goes in the file"},
		{"password in the URL", "redis:\n  url: redis://u:hunter2@a:6379/0\n",
			"t.yaml:2: redis.url: holds a password, which never goes in the file"},
		{"sentinel without master", "redis:\n  sentinel: {addrs: [\"a:26379\"]}\n",
			"t.yaml:2: redis.sentinel.master_name: missing"},
		{"sentinel without addrs", "redis:\n  sentinel: {master_name: m}\n",
			"t.yaml:2: redis.sentinel.addrs: missing"},
		{"cluster with empty addrs", "redis:\n  cluster: {addrs: []}\n",
			"t.yaml:2: redis.cluster.addrs: empty"},
		{"addr without port", "redis:\n  addr: redis.internal\n",
			`t.yaml:2: redis.addr: want host:port, got "redis.internal"`},
		{"addr with a bad port", "redis:\n  cluster: {addrs: [\"a:70000\"]}\n",
			`t.yaml:2: redis.cluster.addrs[0]: "a:70000": the port is not a number from 1 to 65535`},
		{"db of a cluster", "redis:\n  cluster: {addrs: [\"a:7000\"]}\n  db: 2\n",
			"t.yaml:3: redis.db: a Redis Cluster has only database 0"},
		{"db beside a URL", "redis:\n  url: redis://a:6379/1\n  db: 2\n",
			"t.yaml:3: redis.db: the URL gives the database"},
		{"cert without key", "redis:\n  addr: a:6379\n  tls: {cert_file: c.pem}\n",
			"t.yaml:3: redis.tls: give cert_file and key_file together"},
		{"unknown tls field", "redis:\n  addr: a:6379\n  tls: {insecure_skip_verify: true}\n",
			"t.yaml:3: redis.tls.insecure_skip_verify: unknown field"},
		{"empty env name", "redis:\n  addr: a:6379\n  password_env: \"\"\n",
			`t.yaml:3: redis.password_env: "" is not the name of an environment variable`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.section+okPolicy), "t.yaml")
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error\n%v\nlacks %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error repeats the password: %v", err)
			}
		})
	}
}
