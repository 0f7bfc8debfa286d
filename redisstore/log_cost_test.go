package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
	"github.com/redlimit/redlimit/internal/redistest"
)

// serverMicros is the time Redis spent in EVALSHA and EVAL since the last
// CONFIG RESETSTAT, from INFO commandstats: the script's own cost, free of
// the round trip and of this process's scheduling.
func serverMicros(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for line := range strings.Lines(info) {
		for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				for field := range strings.SplitSeq(rest, ",") {
					if v, ok := strings.CutPrefix(field, "usec="); ok {
						n, _ := strconv.ParseInt(v, 10, 64)
						total += n
					}
				}
			}
		}
	}
	return total
}

// The sliding window log's cost in Redis does not grow with the cost of a
// call: a call of the largest cost adds one member and takes Redis a few µs,
// and a denial at the cap finds its RetryAfter in O(log Rate) lookups. The
// figures are logged for the README.
func TestSlidingLogCostInRedis(t *testing.T) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t)})
	t.Cleanup(func() { c.Close() })
	lim := algorithms.Limit{Rate: algorithms.MaxSlidingLogRate, Period: time.Hour}
	l, err := algorithms.New(must(New(c, WithPrefix("logcost"), WithDenialCache(0))), algorithms.SlidingWindowLog, lim)
	if err != nil {
		t.Fatal(err)
	}
	key := func(k string) string {
		return "logcost:{" + k + "}:" + ratemath.StateName(algorithms.SlidingWindowLog, lim)
	}
	// timed returns the least server time of one call over a few tries
	// on the keys keyOf names (fresh ones, or one whose state the call
	// leaves as it was): a busy machine only ever adds to it.
	timed := func(keyOf func(i int) string, cost int, allowed bool) int64 {
		best := int64(-1)
		for i := range 3 {
			k := keyOf(i)
			if err := c.ConfigResetStat(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			res, err := l.Allow(ctx, k, cost)
			if err != nil || res.Allowed != allowed || res.Decider != algorithms.DecidedByStore {
				t.Fatalf("Allow(%s, %d) = %+v, %v", k, cost, res, err)
			}
			if us := serverMicros(t, c); best < 0 || us < best {
				best = us
			}
		}
		return best
	}
	// fill spends k's whole limit in requests of cost 1, from 8
	// goroutines: a denial leaves the log as it was, so one full key
	// serves every try of the denial's timing.
	fill := func(k string) {
		forEachKeyN(8, algorithms.MaxSlidingLogRate, func(int) {
			if res, err := l.Allow(ctx, k, 1); err != nil || !res.Allowed {
				t.Errorf("filling %s: %+v, %v", k, res, err)
			}
		})
		if t.Failed() {
			t.FailNow()
		}
		if n, err := c.ZCard(ctx, key(k)).Result(); err != nil || n != algorithms.MaxSlidingLogRate {
			t.Fatalf("filled %s with %d members (%v), want %d", k, n, err, algorithms.MaxSlidingLogRate)
		}
	}

	maxCost := timed(func(i int) string { return fmt.Sprintf("max%d", i) }, algorithms.MaxSlidingLogRate, true)
	members, err := c.ZCard(ctx, key("max0")).Result()
	if err != nil || members != 1 {
		t.Fatalf("a call of cost %d left %d members (%v), want 1", algorithms.MaxSlidingLogRate, members, err)
	}
	oneCall, _ := c.MemoryUsage(ctx, key("max0")).Result()
	fill("full0")
	denied := timed(func(int) string { return "full0" }, 1, false)
	atCap, _ := c.MemoryUsage(ctx, key("full0")).Result()
	t.Logf("one call of cost %d: %d µs in Redis, %d bytes; a denial at the cap: %d µs; a key at the cap by requests of cost 1: %d bytes",
		algorithms.MaxSlidingLogRate, maxCost, oneCall, denied, atCap)
	if maxCost > 1000 || denied > 1000 {
		t.Fatalf("a call took Redis %d µs (cost %d) and %d µs (denial at the cap): a call's work must not grow with its cost",
			maxCost, algorithms.MaxSlidingLogRate, denied)
	}
}
