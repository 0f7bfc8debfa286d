package redisstore

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
	"github.com/redlimit/redlimit/internal/redistest"
)

// A token bucket kept as a hash {t, ts} by an older script reads as the
// same bucket: the level it holds is what is left, and the first write
// turns it into the string state.
func TestTokenBucketHashStateReads(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	limit := algorithms.PerHour(10)
	for _, limits := range [][]algorithms.Limit{{limit}, {limit, algorithms.PerMinute(5)}} {
		c.FlushAll(ctx)
		l, err := algorithms.New(must(New(c, WithPrefix("legacy"), WithDenialCache(0))), algorithms.TokenBucket, limits...)
		if err != nil {
			t.Fatal(err)
		}
		p := ratemath.ParamsFor(algorithms.TokenBucket, limit)
		now, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		key := "legacy:{k}:" + ratemath.StateName(algorithms.TokenBucket, limit)
		// Two tokens left as of now.
		if err := c.HSet(ctx, key, "t", 2*p.Period, "ts", now.UnixMicro()/p.Unit).Err(); err != nil {
			t.Fatal(err)
		}
		for i, want := range []bool{true, true, false} {
			res, err := l.Allow(ctx, "k", 1)
			if err != nil || res.Allowed != want || res.Decider != algorithms.DecidedByStore {
				t.Fatalf("%d limits, request %d: %+v, %v; want allowed %v by Redis", len(limits), i, res, err, want)
			}
		}
		if typ := c.Type(ctx, key).Val(); typ != "string" {
			t.Errorf("state kept as a %s after a write, want a string", typ)
		}
	}
}
