package grpclimit_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/keyfunc/jwtkey"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/middleware"
)

// FuzzUnaryInterceptor: whatever metadata and peer a call comes with, the
// interceptor answers with one of its codes, never panics, and never puts
// a credential the call sent into its status.
func FuzzUnaryInterceptor(f *testing.F) {
	f.Add("x-forwarded-for", "203.0.113.1, 10.0.0.1", "10.0.0.2:5000", "/pkg.S/M")
	f.Add("authorization", "Bearer a.b.c", "[2001:db8::1]:443", "/pkg.S/M")
	f.Add("x-api-key", strings.Repeat("k", 300), "192.0.2.1:1", "/"+strings.Repeat("m", 300))
	f.Add("forwarded", `for="[2001:db8::1]:80";proto=https`, "10.1.1.1:1", "/a|b%c")
	f.Add("x-forwarded-for", strings.Repeat("1.1.1.1,", 2000), "garbage", "")
	limiter, err := algorithms.New(must(memstore.New()), algorithms.TokenBucket, algorithms.PerMinute(3))
	if err != nil {
		f.Fatal(err)
	}
	kf := keyfunc.FirstOf(
		jwtkey.Subject(func(*jwt.Token) (any, error) { return []byte("fuzz secret of 32 bytes or more!"), nil },
			jwt.WithValidMethods([]string{"HS256"})),
		keyfunc.APIKey("x-api-key", keyfunc.KnownAPIKey(func(raw string) bool { return raw == "known" })),
		keyfunc.IP(keyfunc.TrustProxies(netip.MustParsePrefix("10.0.0.0/8"))),
	)
	interceptors := map[string]grpc.UnaryServerInterceptor{}
	for name, opt := range map[string]grpclimit.Option{
		"fallthrough": grpclimit.WithKeyFunc(kf),
		"api key":     grpclimit.WithKeyFunc(keyfunc.APIKey("x-api-key", keyfunc.KnownAPIKey(func(string) bool { return true }))),
		"shadow":      grpclimit.WithShadow(true),
	} {
		in, err := grpclimit.UnaryServerInterceptor(limiter, opt, grpclimit.WithErrorPolicy(middleware.RefuseOnError))
		if err != nil {
			f.Fatal(err)
		}
		interceptors[name] = in
	}
	allowed := map[codes.Code]bool{codes.OK: true, codes.ResourceExhausted: true, codes.Unauthenticated: true, codes.InvalidArgument: true}
	f.Fuzz(func(t *testing.T, key, value, addr, method string) {
		md := metadata.MD{}
		if k := strings.ToLower(key); k != "" && !strings.HasSuffix(k, "-bin") {
			md[k] = []string{value}
		}
		ctx := metadata.NewIncomingContext(context.Background(), md)
		ctx = peer.NewContext(ctx, &peer.Peer{Addr: fakeAddr(addr)})
		for name, in := range interceptors {
			_, err := in(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method},
				func(context.Context, any) (any, error) { return "ok", nil })
			st := status.Convert(err)
			if !allowed[st.Code()] {
				t.Fatalf("%s: code %v", name, st.Code())
			}
			if len(value) >= 8 && strings.Contains(st.Message(), value) {
				t.Fatalf("%s: the status %q holds the metadata value", name, st.Message())
			}
		}
	})
}

// fakeAddr is a peer address of any text.
type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }

var _ net.Addr = fakeAddr("")
