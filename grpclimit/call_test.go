package grpclimit_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/keyfunc"
)

// callContext is a server call's context from addr with md.
func callContext(addr net.Addr, md ...string) context.Context {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(md...))
	if addr != nil {
		ctx = peer.NewContext(ctx, &peer.Peer{Addr: addr})
	}
	return ctx
}

// TestCallRequest: the stand-in request holds the peer, the text metadata
// under canonical names and the method; keyfunc's functions read it as
// they read an HTTP request.
func TestCallRequest(t *testing.T) {
	v4 := &net.TCPAddr{IP: net.ParseIP("203.0.113.7"), Port: 41000}
	v6 := &net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6"), Port: 41000}
	tests := []struct {
		name string
		addr net.Addr
		md   []string
		kf   keyfunc.KeyFunc
		want string // the key, or "error"
	}{
		{"ipv4 peer", v4, nil, keyfunc.IP(), "ip:203.0.113.7"},
		{"ipv6 peer by /64", v6, nil, keyfunc.IP(), "ip:2001:db8:1:2::/64"},
		{"ipv6 peer by /48", v6, nil, keyfunc.IP(keyfunc.IPv6Prefix(48)), "ip:2001:db8:1::/48"},
		{"no peer", nil, nil, keyfunc.IP(), "error"},
		{"non-TCP peer", &net.UnixAddr{Name: "/run/app.sock", Net: "unix"}, nil, keyfunc.IP(), "error"},
		{"api key from metadata", v4, []string{"x-api-key", "k1"},
			keyfunc.APIKey("X-API-Key", keyfunc.KnownAPIKey(func(string) bool { return true })), "key:" + keyfunc.HashAPIKey("k1")},
		{"binary metadata is left out", v4, []string{"x-api-key-bin", "k1"},
			keyfunc.APIKey("X-API-Key-Bin", keyfunc.KnownAPIKey(func(string) bool { return true })), "error"},
		{"method", v4, nil, grpclimit.Method, "rpc:/pkg.Service/Method"},
		{"method joined with ip", v4, nil, keyfunc.Join(grpclimit.Method, keyfunc.IP()), "rpc:/pkg.Service/Method|ip:203.0.113.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := grpclimit.CallRequest(callContext(tt.addr, tt.md...), "/pkg.Service/Method")
			key, err := tt.kf(r)
			if tt.want == "error" {
				if err == nil {
					t.Fatalf("key %q, want an error", key)
				}
				return
			}
			if err != nil || key != tt.want {
				t.Fatalf("key %q, %v; want %q", key, err, tt.want)
			}
		})
	}
}

// TestMethodKeyBounds: method names a client made up are hashed when long
// or odd, so keys stay short and printable.
func TestMethodKeyBounds(t *testing.T) {
	for _, m := range []string{"/" + strings.Repeat("a", 300), "/pkg.S/M|ip:1.2.3.4", "/pkg.S/\x00"} {
		key, err := grpclimit.Method(&http.Request{Pattern: m})
		if err != nil || !strings.HasPrefix(key, "rpc:#") || len(key) != len("rpc:#")+32 {
			t.Errorf("Method(%.20q) = %q, %v; want a hashed key", m, key, err)
		}
	}
}
