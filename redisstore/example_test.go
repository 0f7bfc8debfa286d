package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/redisstore"
)

// A token bucket in Redis, shared by every instance that uses the same Redis.
func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true, MaxRetries: -1})
	store, err := redisstore.New(client, redisstore.WithPrefix("myapp"))
	if err != nil {
		panic(err)
	}
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

// At shutdown, close the store before its client, with a deadline: Close
// stops the store's goroutines and sends Redis what the store owes it
// (charges of requests admitted while Redis was away, releases of
// concurrency leases), and says how many it could not send.
func ExampleStore_Close() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close() // after the store
	store, err := redisstore.New(client)
	if err != nil {
		panic(err)
	}
	// ... serve requests, until the application shuts down:
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := store.Close(ctx); errors.Is(err, redisstore.ErrUnsent) {
		log.Print(err) // e.g. "... 12 keys' charges and 0 concurrency leases"
	}
}
