package grpclimit_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/grpclimit"
)

// sendStream opens a StreamingInputCall, sends n messages and returns the
// stream's header, trailer and status.
func sendStream(t *testing.T, c testgrpc.TestServiceClient, n int) (metadata.MD, metadata.MD, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := c.StreamingInputCall(ctx)
	if err != nil {
		return nil, nil, err
	}
	for range n {
		if err := s.Send(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: []byte("x")}}); err != nil {
			break // the server ended the stream; CloseAndRecv has its status
		}
	}
	_, err = s.CloseAndRecv()
	header, _ := s.Header()
	return header, s.Trailer(), err
}

// TestStreamOpenLimited: streams are decided when they open: 2 of 3 open,
// the third ends with ResourceExhausted and its details.
func TestStreamOpenLimited(t *testing.T) {
	addr := serveLimited(t, newLimiter(t, algorithms.SlidingWindowLog, algorithms.PerMinute(2)), grpclimit.WithPolicyName("streams"))
	c := dial(t, addr)
	for i := range 3 {
		header, trailer, err := sendStream(t, c, 3)
		if i < 2 {
			if err != nil {
				t.Fatalf("stream %d: %v", i, err)
			}
			checkFields(t, header, `"streams";q=2;w=60`)
			continue
		}
		checkRefusal(t, err, trailer, "streams", 2)
	}
}

// TestStreamMessages: with a message limiter, each message a stream
// receives costs a unit: of 6 messages on one stream, 4 pass and the fifth
// ends the stream with ResourceExhausted, RetryInfo and QuotaFailure,
// whatever the handler does with the error.
func TestStreamMessages(t *testing.T) {
	opens := newLimiter(t, algorithms.FixedWindow, algorithms.PerMinute(10))
	messages := newLimiter(t, algorithms.TokenBucket, algorithms.PerMinute(4))
	stream, err := grpclimit.StreamServerInterceptor(opens, grpclimit.WithPolicyName("chat"), grpclimit.WithMessageLimiter(messages))
	if err != nil {
		t.Fatal(err)
	}
	received := make(chan int, 1)
	swallow := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, _ grpc.StreamHandler) error {
		// A handler that ignores RecvMsg's error and returns nil: the
		// refusal must end the stream all the same.
		n := 0
		for {
			var m testgrpc.StreamingInputCallRequest
			if err := ss.RecvMsg(&m); err != nil {
				received <- n
				return nil
			}
			n++
		}
	}
	addr := serve(t, grpc.ChainStreamInterceptor(stream, swallow))
	c := dial(t, addr)

	_, trailer, err := sendStream(t, c, 6)
	checkRefusal(t, err, trailer, "chat-messages", 4)
	if n := <-received; n != 4 {
		t.Fatalf("the handler received %d messages, want 4", n)
	}
	// Opening another stream is the opens' limit's business: it opens, and
	// its first message is refused.
	_, _, err = sendStream(t, c, 1)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a new stream's message: %v, want ResourceExhausted", err)
	}
	<-received
}
