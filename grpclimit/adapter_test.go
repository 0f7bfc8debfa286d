package grpclimit_test

import (
	"testing"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/grpclimit"
)

// The adapter is a go-grpc-middleware ratelimit.Limiter.
var _ ratelimit.Limiter = (*grpclimit.MiddlewareLimiter)(nil)

// TestMiddlewareLimiter: under go-grpc-middleware's interceptors the
// adapter admits the quota, sends the rate-limit metadata, and refuses the
// rest with ResourceExhausted and the retry trailers (the details are that
// interceptor's to drop).
func TestMiddlewareLimiter(t *testing.T) {
	l, err := grpclimit.NewMiddlewareLimiter(newLimiter(t, algorithms.FixedWindow, algorithms.PerMinute(2)),
		grpclimit.WithPolicyName("mw"))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, grpc.ChainUnaryInterceptor(ratelimit.UnaryServerInterceptor(l)),
		grpc.ChainStreamInterceptor(ratelimit.StreamServerInterceptor(l)))
	c := dial(t, addr)
	for i, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted} {
		code, header, trailer, err := call(t, c)
		if code != want {
			t.Fatalf("call %d: %v, want %v", i, err, want)
		}
		if code == codes.OK {
			checkFields(t, header, `"mw";q=2;w=60`)
		} else if first(trailer, "retry-after") == "" || first(trailer, "grpc-retry-pushback-ms") == "" {
			t.Fatalf("trailer %v, want retry-after and grpc-retry-pushback-ms", trailer)
		}
	}
	// Streams count apart, by method.
	if _, _, err := sendStream(t, c, 1); err != nil {
		t.Fatal(err)
	}
}
