package redisstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/redisstore"
)

// A token bucket in Redis, shared by every instance that uses the same Redis.
func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true, MaxRetries: -1})
	store := redisstore.New(client, redisstore.WithPrefix("myapp"))
	limiter, err := algorithms.New(store, algorithms.TokenBucket, algorithms.PerMinute(60).WithBurst(10))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	r, err := limiter.Allow(ctx, "api-key:3f2a", 1)
	if err != nil {
		fmt.Println("redis unavailable:", err)
		return
	}
	fmt.Println(r.Allowed, r.Remaining)
}
