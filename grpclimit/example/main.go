// Command example serves gRPC's health service rate-limited by grpclimit:
// 5 checks a minute per client address, on one process's memory or, with
// -redis, in Redis, shared by every instance.
//
//	go run ./example -addr 127.0.0.1:50051
//	grpcurl -plaintext 127.0.0.1:50051 grpc.health.v1.Health/Check
//
// The sixth check within a minute gets RESOURCE_EXHAUSTED with RetryInfo
// and QuotaFailure details, and retry-after and grpc-retry-pushback-ms
// trailers. Server reflection is served, unlimited, for grpcurl.
package main

import (
	"context"
	"flag"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/redisstore"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "address to listen on")
	redisURL := flag.String("redis", os.Getenv("REDIS_URL"), "Redis URL (redis://host:port/db); empty keeps the limits in memory")
	flag.Parse()

	store, where, closeStore, err := newStore(*redisURL)
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := algorithms.New(store, algorithms.SlidingWindowCounter, algorithms.PerMinute(5))
	if err != nil {
		log.Fatal(err)
	}
	// Reflection is a tool's, not a client's: leave it unlimited.
	skipReflection := grpclimit.WithSkip(func(_ context.Context, method string) bool {
		return strings.HasPrefix(method, "/grpc.reflection.")
	})
	unary, err := grpclimit.UnaryServerInterceptor(limiter, grpclimit.WithPolicyName("health"), skipReflection)
	if err != nil {
		log.Fatal(err)
	}
	stream, err := grpclimit.StreamServerInterceptor(limiter, grpclimit.WithPolicyName("health"), skipReflection)
	if err != nil {
		log.Fatal(err)
	}

	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	reflection.Register(srv)
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("grpclimit example listening on %s, limits kept %s", lis.Addr(), where)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-stop; srv.GracefulStop() }()
	if err := srv.Serve(lis); err != nil {
		log.Fatal(err)
	}
	// Stopped: the store sends Redis what it owes, for 5 seconds at most.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := closeStore(ctx); err != nil {
		log.Print(err)
	}
}

// newStore returns a Redis store for url, or a memory store when url is
// empty, where it keeps the limits, and the function that closes it (the
// store, then its client) at shutdown.
func newStore(url string) (algorithms.Store, string, func(context.Context) error, error) {
	if url == "" {
		store, err := memstore.New()
		return store, "in memory (this process only)", store.Close, err
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, "", nil, err
	}
	opts.ContextTimeoutEnabled = true
	client := redis.NewClient(opts)
	store, err := redisstore.New(client)
	if err != nil {
		_ = client.Close()
		return nil, "", nil, err
	}
	closeStore := func(ctx context.Context) error {
		defer client.Close() // after the store
		return store.Close(ctx)
	}
	return store, "in Redis", closeStore, nil
}
