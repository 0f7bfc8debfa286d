package redisstore

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

func TestZZStats(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.TokenBucket} {
		l, _ := algorithms.New(New(c), alg, benchLimit(alg))
		for i := 0; i < 2000; i++ {
			l.Allow(ctx, benchKeys[i&(len(benchKeys)-1)], 1)
		}
		c.ConfigResetStat(ctx)
		for i := 0; i < 20000; i++ {
			l.Allow(ctx, benchKeys[i&(len(benchKeys)-1)], 1)
		}
		info, _ := c.Info(ctx, "commandstats").Result()
		for _, line := range strings.Split(info, "\n") {
			if strings.HasPrefix(line, "cmdstat_") {
				fmt.Println(alg, strings.TrimSpace(line))
			}
		}
	}
}
