package middleware

import (
	"net/http"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

func BenchmarkZZRedis50(b *testing.B) {
	addr := redistest.Standalone(b)
	reqs := benchRequests()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 50, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer c.Close()
	lim, err := algorithms.New(algorithms.NewRedisStore(c), algorithms.FixedWindow, huge)
	if err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(25)
	serveParallel(b, New(lim)(trivial), reqs, http.StatusNoContent)
}
