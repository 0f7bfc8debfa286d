package grpclimit_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/netip"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/keyfunc/jwtkey"
	"github.com/redlimit/redlimit/memstore"
)

// A health service limited to 2 checks a minute per client address; the
// third check is refused, and the client reads why.
func ExampleUnaryServerInterceptor() {
	now := time.Unix(1_800_000_000, 0) // a fixed clock, for a fixed output
	clock := func() time.Time { return now }
	store, err := memstore.New(memstore.WithClock(clock))
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(2))
	if err != nil {
		log.Fatal(err)
	}
	unary, err := grpclimit.UnaryServerInterceptor(limiter,
		grpclimit.WithPolicyName("health"), grpclimit.WithClock(clock))
	if err != nil {
		log.Fatal(err) // a misconfiguration
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(unary))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)
	for range 3 {
		var header, trailer metadata.MD
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{},
			grpc.Header(&header), grpc.Trailer(&trailer))
		if err == nil {
			fmt.Println("OK", header.Get("ratelimit"))
			continue
		}
		st := status.Convert(err)
		fmt.Println(st.Code(), st.Message())
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.RetryInfo:
				fmt.Println("RetryInfo:", d.GetRetryDelay().AsDuration())
			case *errdetails.QuotaFailure:
				v := d.GetViolations()[0]
				fmt.Printf("QuotaFailure: subject=%s quota_id=%s quota_value=%d\n", v.GetSubject(), v.GetQuotaId(), v.GetQuotaValue())
			}
		}
		fmt.Println("retry-after:", trailer.Get("retry-after"), "grpc-retry-pushback-ms:", trailer.Get("grpc-retry-pushback-ms"))
	}
	// Output:
	// OK ["health";r=1;t=60]
	// OK ["health";r=0;t=60]
	// ResourceExhausted rate limit "health" exceeded: 2 per 1m0s; retry after 1m0s
	// RetryInfo: 1m0s
	// QuotaFailure: subject=ip quota_id=health quota_value=2
	// retry-after: [60] grpc-retry-pushback-ms: [60000]
}

// Limiting streams when they open, 10 a minute per verified JWT subject,
// and then each stream's messages, 100 a minute per subject.
func ExampleStreamServerInterceptor() {
	store, err := memstore.New()
	if err != nil {
		log.Fatal(err)
	}
	opens, _ := algorithms.New(store, algorithms.SlidingWindowCounter, algorithms.PerMinute(10))
	messages, _ := algorithms.New(store, algorithms.TokenBucket, algorithms.PerMinute(100))
	secret := []byte("the service's HS256 secret")
	bySubject := jwtkey.Subject(func(*jwt.Token) (any, error) { return secret, nil },
		jwt.WithValidMethods([]string{"HS256"})) // reads the authorization metadata
	stream, err := grpclimit.StreamServerInterceptor(opens,
		grpclimit.WithKeyFunc(bySubject), grpclimit.WithMessageLimiter(messages))
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainStreamInterceptor(stream))
	_ = srv // register services and serve
}

// Pacing outbound calls so that every instance together stays within an
// upstream's quota of 5 calls a second: on a Redis store the instances
// share the bucket; here, in memory, one process paces itself.
func ExampleUnaryClientInterceptor() {
	store, err := memstore.New()
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := algorithms.New(store, algorithms.LeakyBucket, algorithms.PerSecond(5).WithBurst(1))
	if err != nil {
		log.Fatal(err)
	}
	pace, err := grpclimit.UnaryClientInterceptor(limiter, grpclimit.WithMaxDelay(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	cc, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithChainUnaryInterceptor(pace))
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)
	start := time.Now()
	for range 3 {
		if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("3 calls, 200ms apart:", time.Since(start) >= 380*time.Millisecond)
	// Output:
	// 3 calls, 200ms apart: true
}

// A service built on go-grpc-middleware's rate-limit interceptor, keyed by
// the client's address behind a trusted proxy.
func ExampleNewMiddlewareLimiter() {
	store, err := memstore.New()
	if err != nil {
		log.Fatal(err)
	}
	limiter, _ := algorithms.New(store, algorithms.SlidingWindowCounter, algorithms.PerMinute(100))
	clientIP := keyfunc.IP(keyfunc.TrustProxies(netip.MustParsePrefix("10.0.0.0/8")))
	l, err := grpclimit.NewMiddlewareLimiter(limiter, grpclimit.WithKeyFunc(clientIP))
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(ratelimit.UnaryServerInterceptor(l)),
		grpc.ChainStreamInterceptor(ratelimit.StreamServerInterceptor(l)))
	_ = srv // register services and serve
}
