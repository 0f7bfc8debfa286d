package redisstore

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

func TestCheckVersion(t *testing.T) {
	tests := []struct {
		info string
		old  bool
	}{
		{"# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n", false},
		{"# Server\r\nredis_version:5.0.0\r\n", false},
		{"# Server\r\nredis_version:10.2.1\r\n", false},
		{"# Server\r\nredis_version:4.0.14\r\n", true},
		{"# Server\r\nredis_version:3.2.12\r\n", true},
		{"# Server\r\nredis_version:x\r\n", true},
		{"# Server\r\nredis_mode:standalone\r\n", true},
	}
	for _, tt := range tests {
		err := checkVersion(tt.info)
		if got := errors.Is(err, ErrVersion); got != tt.old {
			t.Errorf("%q: %v, want old %v", tt.info, err, tt.old)
		}
	}
}

// fakeRedisError is an error reply as go-redis returns one.
type fakeRedisError string

func (e fakeRedisError) Error() string { return string(e) }
func (fakeRedisError) RedisError()     {}

// What servers too old for the scripts answer is reported as
// ErrVersion; other errors are not.
func TestScriptErrorNamesOldServers(t *testing.T) {
	tests := []struct {
		err error
		old bool
	}{
		{fakeRedisError("ERR Error running script (call to f_0123): @user_script:14: @user_script: 14: Write commands not allowed after non deterministic commands. Call redis.replicate_commands() at the start of your script in order to switch to single commands replication mode."), true},
		{fakeRedisError("ERR unknown command 'EVALSHA'"), true},
		{fakeRedisError("ERR Error running script (call to f_0123): @user_script:60: ERR unknown command 'UNLINK'"), true},
		{fakeRedisError("ERR Error running script (call to f_0123): @user_script:40: ERR wrong number of arguments for 'hset' command"), true},
		{fakeRedisError("OOM command not allowed when used memory > 'maxmemory'."), false},
		{fakeRedisError("NOSCRIPT No matching script. Please use EVAL."), false},
		{errors.New("dial tcp: unknown command"), false}, // not a reply
	}
	for _, tt := range tests {
		err := scriptError(algorithms.FixedWindow, tt.err)
		if got := errors.Is(err, ErrVersion); got != tt.old {
			t.Errorf("%q: %v, want old %v", tt.err, err, tt.old)
		}
		if !errors.Is(err, tt.err) {
			t.Errorf("%q: the cause is not wrapped: %v", tt.err, err)
		}
	}
}

func TestCheckRedisVersionOnServers(t *testing.T) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
	defer c.Close()
	if err := CheckVersion(ctx, c); err != nil {
		t.Fatalf("standalone: %v", err)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.Cluster(t)})
	defer cc.Close()
	if err := CheckVersion(ctx, cc); err != nil {
		t.Fatalf("cluster: %v", err)
	}
	if err := CheckVersion(ctx, nil); !errors.Is(err, algorithms.ErrInvalidOption) {
		t.Fatalf("nil client: %v", err)
	}
}
