package subjects

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/bench/internal/redisproc"
)

// TestCommandCounter checks that the counter counts each command Redis
// answers, sent alone, in a pipeline or in a transaction (not its MULTI
// and EXEC), error replies and nil included, and none that got no reply.
func TestCommandCounter(t *testing.T) {
	srv, err := redisproc.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	cases := []struct {
		name string
		addr string
		send func(ctx context.Context, c *redis.Client)
		want int64
	}{
		{"alone", srv.Addr, func(ctx context.Context, c *redis.Client) {
			c.Set(ctx, "k", "v", 0)
			c.Get(ctx, "missing")                                                    // nil reply
			c.HGet(ctx, "k", "f")                                                    // error reply: WRONGTYPE
			c.Eval(ctx, "redis.call('get','k') redis.call('get','k') return 1", nil) // one command
		}, 4},
		{"pipeline", srv.Addr, func(ctx context.Context, c *redis.Client) {
			_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Incr(ctx, "n")
				p.Get(ctx, "missing")
				p.HGet(ctx, "n", "f")
				return nil
			})
		}, 3},
		{"transaction", srv.Addr, func(ctx context.Context, c *redis.Client) {
			_, _ = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Incr(ctx, "n")
				p.Incr(ctx, "n")
				return nil
			})
		}, 2},
		{"no Redis", "127.0.0.1:1", func(ctx context.Context, c *redis.Client) {
			c.Get(ctx, "k")
			_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Get(ctx, "k")
				p.Get(ctx, "k")
				return nil
			})
		}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, counter := newClient(Env{RedisAddr: tc.addr, PoolSize: 2})
			defer c.Close()
			if tc.addr == srv.Addr {
				if err := c.Ping(ctx).Err(); err != nil { // the handshake, then one PING
					t.Fatal(err)
				}
			}
			before := counter.count()
			tc.send(ctx, c)
			if got := counter.count() - before; got != tc.want {
				t.Errorf("counted %d commands, want %d", got, tc.want)
			}
		})
	}
}
