package redisstore

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// One request of a plain cost on a limiter of one limit goes to the
// one-request script, alone or in a pipeline; several limits, a peek, or
// several requests of one key go to the driver.
func TestOneRequestScript(t *testing.T) {
	ctx := context.Background()
	loaded := func(t *testing.T, c *redis.Client, s *redis.Script) bool {
		t.Helper()
		ok, err := s.Exists(ctx, c).Result()
		if err != nil {
			t.Fatal(err)
		}
		return ok[0]
	}
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			addr := redistest.Standalone(t)
			c := redis.NewClient(&redis.Options{Addr: addr})
			defer c.Close()
			if err := c.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			one, err := algorithms.New(must(New(c)), alg, algorithms.PerMinute(5))
			if err != nil {
				t.Fatal(err)
			}
			if res, err := one.Allow(ctx, "k", 1); err != nil || !res.Allowed || res.Remaining != 4 || res.Decider != algorithms.DecidedByStore {
				t.Fatalf("%+v %v", res, err)
			}
			lean := one.(*redisLimiter).scriptOne
			if !loaded(t, c, lean) || loaded(t, c, algorithmScripts[alg]) {
				t.Fatalf("after one request: one-request script loaded %v, driver %v; want only the first",
					loaded(t, c, lean), loaded(t, c, algorithmScripts[alg]))
			}
			if _, err := one.Peek(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			if !loaded(t, c, algorithmScripts[alg]) {
				t.Fatal("a peek did not go to the driver")
			}
			if err := c.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			two, err := algorithms.New(must(New(c)), alg, algorithms.PerMinute(5), algorithms.PerHour(50))
			if err != nil {
				t.Fatal(err)
			}
			if res, err := two.Allow(ctx, "k", 1); err != nil || !res.Allowed {
				t.Fatalf("%+v %v", res, err)
			}
			if two.(*redisLimiter).scriptOne != nil || loaded(t, c, lean) {
				t.Fatal("a limiter of two limits used a one-request script")
			}
		})
	}
}

// A deciding call's lifetime argument reads as is the first time go-redis
// writes it and negated every time after, until it is set for a new call.
func TestOnceArg(t *testing.T) {
	a := newOnceArg("2200")
	for i, want := range []string{"2200", "-2200", "-2200"} {
		b, err := a.MarshalBinary()
		if err != nil || string(b) != want {
			t.Fatalf("write %d: %q, %v; want %q", i, b, err, want)
		}
	}
	a.set("2200")
	if b, _ := a.MarshalBinary(); string(b) != "2200" {
		t.Fatalf("first write after set: %q, want 2200", b)
	}
	a.set("600000")
	if b, _ := a.MarshalBinary(); string(b) != "600000" || a.String() != "600000" {
		t.Fatalf("after set(600000): %q (%s)", b, a)
	}
}
