package config

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/memstore"
)

// What Build refuses about the store: a connection missing, in two
// places, or a password's variable unset; nothing it says repeats a
// password.
func TestBuildStoreErrors(t *testing.T) {
	t.Setenv("RL_SET", "hunter2")
	t.Setenv("RL_UNSET", "")
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	tests := []struct {
		name    string
		section string
		opts    []Option
		want    string
	}{
		{"no connection", "redis:\n  prefix: app\n", nil,
			"t.yaml:2: redis: no connection: give one of url, url_env, addr, sentinel, cluster, or the client in code (config.WithRedisClient)"},
		{"password variable unset", "redis:\n  addr: a:6379\n  password_env: RL_UNSET\n", nil,
			"t.yaml:3: redis.password_env: the environment variable RL_UNSET is unset or empty"},
		{"sentinel password variable unset", "redis:\n  sentinel: {master_name: m, addrs: [\"a:26379\"], password_env: RL_UNSET}\n  password_env: RL_SET\n", nil,
			"t.yaml:2: redis.sentinel.password_env: the environment variable RL_UNSET is unset or empty"},
		{"a client in code and a connection in the file", "redis:\n  addr: a:6379\n  password_env: RL_SET\n", []Option{WithRedisClient(client)},
			"t.yaml:2: redis.addr: the application gives the Redis client (config.WithRedisClient)"},
		{"a client in code and TLS in the file", "redis:\n  tls: {ca_file: ca.pem}\n", []Option{WithRedisClient(client)},
			"t.yaml:2: redis.tls: the application gives the Redis client"},
		{"a store in code and Redis in the file", "redis:\n  prefix: app\n", []Option{WithStore(must(memstore.New()))},
			"t.yaml:2: redis: the application gives the store (config.WithStore)"},
		{"a store in code and memory in the file", "memory: {max_keys: 2048}\n", []Option{WithStore(must(memstore.New()))},
			"t.yaml: memory: the application gives the store (config.WithStore)"},
		{"a store and a client", "", []Option{WithStore(must(memstore.New())), WithRedisClient(client)},
			"WithStore and WithRedisClient: give one"},
		{"a store and store options", "", []Option{WithStore(must(memstore.New())), WithMemoryStoreOptions(memstore.WithMaxKeys(4096))},
			"store options with WithStore"},
		{"nil client", "", []Option{WithRedisClient(nil)}, "WithRedisClient: nil client"},
		{"nil store", "", []Option{WithStore(nil)}, "WithStore: nil store"},
		{"a store not made by its constructor", "", []Option{WithStore(&memstore.Store{})}, "WithStore: "},
		{"missing CA file", "redis:\n  addr: a:6379\n  tls: {ca_file: /nonexistent/ca.pem}\n", nil,
			"t.yaml:3: redis.tls.ca_file: open /nonexistent/ca.pem: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.section+okPolicy), "t.yaml")
			if err != nil {
				t.Fatal(err)
			}
			rt, err := c.Build(append([]Option{WithLogger(quiet())}, tt.opts...)...)
			if err == nil {
				rt.Close(closeCtx())
				t.Fatalf("built, want an error with %q", tt.want)
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error\n%v\nlacks %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error repeats a password: %v", err)
			}
		})
	}
	if err := client.Ping(context.Background()).Err(); errors.Is(err, redis.ErrClosed) {
		t.Fatal("a failed Build closed the application's client")
	}
}

// Build makes the client the file describes without dialling it, and
// Store names it without a password.
func TestBuildStoreDescribed(t *testing.T) {
	t.Setenv("RL_PW", "hunter2")
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	tests := []struct {
		name    string
		section string
		opts    []Option
		want    string
	}{
		{"addr", "redis:\n  addr: 127.0.0.1:1\n  username: app\n  password_env: RL_PW\n  db: 2\n", nil, "Redis at 127.0.0.1:1 db 2"},
		{"url and a password from the environment", "redis:\n  url: redis://127.0.0.1:1/3\n  password_env: RL_PW\n", nil, "Redis at 127.0.0.1:1 db 3"},
		{"sentinel", "redis:\n  sentinel: {master_name: m, addrs: [\"127.0.0.1:1\", \"127.0.0.1:2\"], password_env: RL_PW}\n  db: 1\n", nil,
			"Redis Sentinel master m via 127.0.0.1:1, 127.0.0.1:2 db 1"},
		{"cluster over TLS", "redis:\n  cluster: {addrs: [\"127.0.0.1:1\"]}\n  tls:\n", nil, "Redis Cluster via 127.0.0.1:1 over TLS"},
		{"the application's client", "redis:\n  prefix: app\n", []Option{WithRedisClient(client)}, "Redis through the application's client"},
		{"the application's client, no redis section", "", []Option{WithRedisClient(client)}, "Redis through the application's client"},
		{"the application's store", "", []Option{WithStore(must(memstore.New()))}, "the application's store"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.section+okPolicy), "t.yaml")
			if err != nil {
				t.Fatal(err)
			}
			rt, err := c.Build(append([]Option{WithLogger(quiet())}, tt.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close(closeCtx())
			if got := rt.Store(); got != tt.want {
				t.Errorf("Store() %q, want %q", got, tt.want)
			}
		})
	}
}
