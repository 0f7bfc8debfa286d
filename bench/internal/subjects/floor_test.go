package subjects

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/bench/internal/redisproc"
)

// TestFloor checks that the floor sends Redis one GET of the client's key
// per request and nothing else, and passes every request whatever the key
// holds; that its client's command counter counts those GETs; and that a
// Redis it cannot reach shows as 503s.
func TestFloor(t *testing.T) {
	srv, err := redisproc.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	if err := admin.Set(ctx, floorPrefix+"10.0.0.2", "anything", 0).Err(); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, addr string
		env        Env
		want       int
		gets       int64 // GETs of the key that Redis sees per request
	}{
		{"missing key", "10.0.0.1:40000", Env{RedisAddr: srv.Addr, PoolSize: 4}, http.StatusNoContent, 1},
		{"key with a value", "10.0.0.2:40000", Env{RedisAddr: srv.Addr, PoolSize: 4}, http.StatusNoContent, 1},
		{"no Redis", "10.0.0.3:40000", Env{RedisAddr: "127.0.0.1:1", PoolSize: 4}, http.StatusServiceUnavailable, 0},
	}
	const requests = 20
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inst, err := Floor().Build(tc.env, Trivial)
			if err != nil {
				t.Fatal(err)
			}
			defer inst.Close()
			serve := func() {
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.RemoteAddr = tc.addr
				ctx, cancel := context.WithTimeout(r.Context(), time.Second)
				rec := httptest.NewRecorder()
				inst.Handler.ServeHTTP(rec, r.WithContext(ctx))
				cancel()
				if rec.Code != tc.want {
					t.Fatalf("status %d, want %d", rec.Code, tc.want)
				}
			}
			serve() // opens the connection: its handshake counts as commands too
			if err := admin.ConfigResetStat(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			before := inst.Commands()
			for range requests {
				serve()
			}
			if got := inst.Commands() - before; got != tc.gets*requests {
				t.Errorf("the client counted %d commands for %d requests, want %d each", got, requests, tc.gets)
			}
			calls := commandCalls(t, admin)
			if calls["get"] != tc.gets*requests {
				t.Errorf("Redis saw %d GETs for %d requests, want %d each", calls["get"], requests, tc.gets)
			}
			for cmd, n := range calls {
				if cmd != "get" && cmd != "config|resetstat" && cmd != "info" && cmd != "hello" && cmd != "client|setinfo" {
					t.Errorf("Redis saw %d x %s, want only GETs", n, cmd)
				}
			}
		})
	}
}

// commandCalls reads INFO commandstats: command name → calls.
func commandCalls(t *testing.T, c *redis.Client) map[string]int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		var n int64
		for _, ch := range rest {
			if ch < '0' || ch > '9' {
				break
			}
			n = n*10 + int64(ch-'0')
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return out
}
