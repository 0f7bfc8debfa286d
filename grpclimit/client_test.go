package grpclimit_test

import (
	"context"
	"errors"
	"sync"
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

// pacedClient dials addr through the client interceptors over limiter.
func pacedClient(t *testing.T, addr string, limiter algorithms.Limiter, opts ...grpclimit.ClientOption) testgrpc.TestServiceClient {
	t.Helper()
	unary, err := grpclimit.UnaryClientInterceptor(limiter, opts...)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := grpclimit.StreamClientInterceptor(limiter, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return dial(t, addr, grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream))
}

// TestClientPacing: calls made at once through a leaky bucket of 1 per
// 50ms are sent one interval apart, all of them; the server, limiting at
// the same rate (with a burst of 3 for the network's jitter), refuses none.
func TestClientPacing(t *testing.T) {
	const interval = 50 * time.Millisecond
	limit := algorithms.Limit{Rate: 1, Period: interval}
	addr := serveLimited(t, newLimiter(t, algorithms.LeakyBucket, limit.WithBurst(3)), grpclimit.WithMethodScope(false))
	c := pacedClient(t, addr, newLimiter(t, algorithms.LeakyBucket, limit))

	const n = 6
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if code, _, _, err := call(t, c); code != codes.OK {
				t.Errorf("paced call refused by the server: %v", err)
			}
		})
	}
	wg.Wait()
	if took := time.Since(start); took < (n-1)*interval*9/10 {
		t.Fatalf("%d calls took %v, want about %v", n, took, (n-1)*interval)
	}
}

// TestClientCancel: a call whose context ends while it waits is not sent,
// fails with the context's status, and gives its slot back by default, so
// that the next call's turn comes as if it had never been made.
func TestClientCancel(t *testing.T) {
	const interval = 200 * time.Millisecond
	limit := algorithms.Limit{Rate: 1, Period: interval}
	for _, refund := range []bool{true, false} {
		t.Run(map[bool]string{true: "refund", false: "keep"}[refund], func(t *testing.T) {
			rec := &recorder{}
			addr := serveLimited(t, newLimiter(t, algorithms.FixedWindow, algorithms.PerMinute(100)), grpclimit.WithObserver(rec))
			limiter := newLimiter(t, algorithms.LeakyBucket, limit)
			c := pacedClient(t, addr, limiter, grpclimit.WithRefundOnCancel(refund))

			if code, _, _, err := call(t, c); code != codes.OK { // takes the burst
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
			if status.Code(err) != codes.Canceled {
				t.Fatalf("a call canceled while waiting: %v, want Canceled", err)
			}
			if rec.count("allowed") != 1 {
				t.Fatalf("the server saw %v, want only the first call", rec.outcomes)
			}
			res, err := limiter.Peek(context.Background(), "upstream:"+addr)
			if err != nil {
				t.Fatal(err)
			}
			// Given back, the next turn is the first call's interval's end;
			// kept, one interval later.
			if wantMax := interval; refund && res.RetryAfter > wantMax {
				t.Fatalf("after the refund the next turn is %v away, want at most %v", res.RetryAfter, wantMax)
			}
			if wantMin := interval + interval/2; !refund && res.RetryAfter < wantMin {
				t.Fatalf("with the slot kept the next turn is %v away, want at least %v", res.RetryAfter, wantMin)
			}
		})
	}
}

// TestClientTooFar: a call whose turn is beyond WithMaxDelay, or beyond
// its deadline, fails at once with ResourceExhausted and RetryInfo, never
// sent and taking nothing.
func TestClientTooFar(t *testing.T) {
	limiter := newLimiter(t, algorithms.TokenBucket, algorithms.PerMinute(1))
	addr := serveLimited(t, newLimiter(t, algorithms.FixedWindow, algorithms.PerMinute(100)))
	c := pacedClient(t, addr, limiter, grpclimit.WithMaxDelay(time.Second))
	if code, _, _, err := call(t, c); code != codes.OK {
		t.Fatal(err)
	}
	start := time.Now()
	code, _, _, err := call(t, c)
	if code != codes.ResourceExhausted || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("%v after %v, want ResourceExhausted at once", err, time.Since(start))
	}
	if ri, _ := details(err); ri.GetRetryDelay().AsDuration() < 50*time.Second {
		t.Fatalf("RetryInfo %v, want about a minute", ri)
	}

	// A deadline shorter than the turn: the same, before the deadline.
	c = pacedClient(t, addr, newLimiter(t, algorithms.LeakyBucket, algorithms.Limit{Rate: 1, Period: time.Second}))
	if code, _, _, err := call(t, c); code != codes.OK {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	if status.Code(err) != codes.ResourceExhausted || ctx.Err() != nil {
		t.Fatalf("%v (context %v), want ResourceExhausted before the deadline", err, ctx.Err())
	}
}

// TestClientStream: streams wait their turn before they open.
func TestClientStream(t *testing.T) {
	const interval = 100 * time.Millisecond
	addr := serveLimited(t, newLimiter(t, algorithms.FixedWindow, algorithms.PerMinute(100)))
	c := pacedClient(t, addr, newLimiter(t, algorithms.LeakyBucket, algorithms.Limit{Rate: 1, Period: interval}))
	start := time.Now()
	for range 3 {
		if _, _, err := sendStream(t, c, 1); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 2*interval*9/10 {
		t.Fatalf("3 streams opened within %v, want about %v", took, 2*interval)
	}
}

// TestClientFailure: a limiter that fails fails the call with Unavailable,
// or sends it unpaced under FailOpen.
func TestClientFailure(t *testing.T) {
	addr := serveLimited(t, newLimiter(t, algorithms.FixedWindow, algorithms.PerMinute(100)))
	bad := &brokenBucket{RateLimiter: newLimiter(t, algorithms.TokenBucket, algorithms.PerMinute(1))}
	if code, _, _, err := call(t, pacedClient(t, addr, bad)); code != codes.Unavailable {
		t.Fatalf("%v, want Unavailable", err)
	}
	c := pacedClient(t, addr, bad, grpclimit.WithClientErrorPolicy(middleware.PassOnError))
	if code, _, _, err := call(t, c); code != codes.OK {
		t.Fatalf("%v, want the call sent under FailOpen", err)
	}
}

// brokenBucket is a bucket whose reservations fail.
type brokenBucket struct {
	algorithms.RateLimiter
}

func (*brokenBucket) Reserve(context.Context, string, int, time.Duration) (algorithms.Result, error) {
	return algorithms.Result{}, errors.New(secretText)
}
