package grpclimit_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/middleware"
)

// retryConfig is a service config whose retry policy retries
// RESOURCE_EXHAUSTED: its own backoff is 10 ms, so a retry that waits
// longer waits for the server's pushback.
const retryConfig = `{"methodConfig": [{
	"name": [{"service": "grpc.testing.TestService"}],
	"retryPolicy": {
		"maxAttempts": 3,
		"initialBackoff": "0.01s",
		"maxBackoff": "0.01s",
		"backoffMultiplier": 1.0,
		"retryableStatusCodes": ["RESOURCE_EXHAUSTED"]
	}
}]}`

// TestRetryPushback: a client whose retry policy retries RESOURCE_EXHAUSTED
// waits the grpc-retry-pushback-ms trailer's delay, not its own backoff,
// and its retry then passes. A refusal whose cost exceeds the quota says
// never (-1), and the client does not retry it.
func TestRetryPushback(t *testing.T) {
	const interval = 300 * time.Millisecond // the bucket's: 1 per 300ms
	rec := &recorder{}
	limiter := newLimiter(t, algorithms.LeakyBucket, algorithms.Limit{Rate: 1, Period: interval})
	addr := serveLimited(t, limiter, grpclimit.WithObserver(rec),
		grpclimit.WithCost(func(_ context.Context, _ string, req any) int {
			if r, ok := req.(*testgrpc.SimpleRequest); ok && r.GetResponseSize() > 0 {
				return int(r.GetResponseSize())
			}
			return 1
		}))
	c := dial(t, addr, grpc.WithDefaultServiceConfig(retryConfig))
	ctx := context.Background()

	if _, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil {
		t.Fatalf("the retried call: %v", err)
	}
	took := time.Since(start)
	t.Logf("refused, then retried after the pushback: passed after %v (the client's own backoff is 10ms)", took)
	if took < interval*8/10 {
		t.Fatalf("the retry came after %v, before the pushback of about %v", took, interval)
	}
	if d, a := rec.count(middleware.OutcomeDenied), rec.count(middleware.OutcomeAllowed); d != 1 || a != 2 {
		t.Fatalf("server saw %d denied and %d allowed, want 1 and 2: %v", d, a, rec.outcomes)
	}

	// Cost 2 against a capacity of 1: never passes, and is never retried.
	_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseSize: 2})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a call costing more than the quota: %v", err)
	}
	if n := rec.count(middleware.OutcomeInvalid); n != 1 {
		t.Fatalf("the server saw the costly call %d times, want once (no retry)", n)
	}
}
