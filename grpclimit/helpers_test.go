package grpclimit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/middleware"
)

// The test service's methods, as interceptors see them.
const (
	unaryMethod = "/grpc.testing.TestService/UnaryCall"
	emptyMethod = "/grpc.testing.TestService/EmptyCall"
	inputMethod = "/grpc.testing.TestService/StreamingInputCall"
)

// testService is grpc's interop test service: unary calls answer at once,
// StreamingInputCall counts the messages it receives.
type testService struct {
	testgrpc.UnimplementedTestServiceServer
}

func (testService) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	return &testgrpc.Empty{}, nil
}

func (testService) UnaryCall(_ context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{Payload: req.GetPayload()}, nil
}

func (testService) StreamingInputCall(s testgrpc.TestService_StreamingInputCallServer) error {
	n := 0
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return s.SendAndClose(&testgrpc.StreamingInputCallResponse{AggregatedPayloadSize: int32(n)})
		}
		if err != nil {
			return err
		}
		n += len(m.GetPayload().GetBody())
	}
}

// serve starts a gRPC server with the test service on a loopback TCP port
// and returns its address; it stops when the test ends.
func serve(t testing.TB, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(srv, testService{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// serveLimited starts a server whose calls and streams pass through the
// interceptors made with limiter and opts.
func serveLimited(t testing.TB, limiter algorithms.Limiter, opts ...grpclimit.Option) string {
	t.Helper()
	unary, err := grpclimit.UnaryServerInterceptor(limiter, opts...)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := grpclimit.StreamServerInterceptor(limiter, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream))
}

// dial connects a client of the test service to addr.
func dial(t testing.TB, addr string, opts ...grpc.DialOption) testgrpc.TestServiceClient {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return testgrpc.NewTestServiceClient(cc)
}

// call makes one unary call with md as its metadata and returns its status
// code, header and trailer.
func call(t testing.TB, c testgrpc.TestServiceClient, md ...string) (codes.Code, metadata.MD, metadata.MD, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	var header, trailer metadata.MD
	_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
	return status.Code(err), header, trailer, err
}

// newLimiter returns a limiter of alg and limits on a fresh memory store.
func newLimiter(t testing.TB, alg algorithms.Algorithm, limits ...algorithms.Limit) algorithms.RateLimiter {
	t.Helper()
	l, err := algorithms.New(must(memstore.New()), alg, limits...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// details returns the RetryInfo and QuotaFailure of a status, nil when
// absent.
func details(err error) (*errdetails.RetryInfo, *errdetails.QuotaFailure) {
	var (
		ri *errdetails.RetryInfo
		qf *errdetails.QuotaFailure
	)
	for _, d := range status.Convert(err).Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			ri = d
		case *errdetails.QuotaFailure:
			qf = d
		}
	}
	return ri, qf
}

// count counts codes.
func count(got []codes.Code) map[codes.Code]int {
	m := map[codes.Code]int{}
	for _, c := range got {
		m[c]++
	}
	return m
}

// recorder is an Observer that remembers every outcome.
type recorder struct {
	mu       sync.Mutex
	outcomes []string
}

func (r *recorder) Decision(d middleware.Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes = append(r.outcomes, d.Outcome)
}

func (r *recorder) BreakerChanged(string, bool) {}

func (r *recorder) count(outcome string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, o := range r.outcomes {
		if o == outcome {
			n++
		}
	}
	return n
}

// failingLimiter fails every decision with an error whose text must never
// reach a client.
type failingLimiter struct{}

const secretText = "internal detail: redis at 10.1.2.3 password hunter2"

func (failingLimiter) Allow(context.Context, string, int) (algorithms.Result, error) {
	return algorithms.Result{}, errors.New(secretText)
}

// leaks reports whether any of texts holds one of secrets.
func leaks(secrets []string, texts ...string) bool {
	for _, s := range secrets {
		for _, t := range texts {
			if s != "" && strings.Contains(t, s) {
				return true
			}
		}
	}
	return false
}

// emptyMsg is the test service's empty message.
func emptyMsg() *testgrpc.Empty { return &testgrpc.Empty{} }
