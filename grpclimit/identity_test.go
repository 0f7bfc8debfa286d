package grpclimit_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/keyfunc/jwtkey"
)

var jwtSecret = []byte("a test secret, at least 32 bytes long")

// token signs an HS256 token for sub, expiring after ttl (negative: past).
func token(t *testing.T, sub string, ttl time.Duration) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": sub, "exp": time.Now().Add(ttl).Unix(),
	}).SignedString(jwtSecret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCredentials: calls keyed by a known API key or a verified JWT
// subject get a quota per caller; a missing, unknown, malformed, expired
// or huge credential gets Unauthenticated, whose status never holds it.
func TestCredentials(t *testing.T) {
	known := map[string]bool{"key-alice": true, "key-bob": true}
	apiKey := keyfunc.APIKey("x-api-key", keyfunc.KnownAPIKey(func(raw string) bool { return known[raw] }))
	bearer := jwtkey.Subject(func(*jwt.Token) (any, error) { return jwtSecret, nil },
		jwt.WithValidMethods([]string{"HS256"}))
	huge := strings.Repeat("A", 1<<20)
	alice, bob := token(t, "alice", time.Hour), token(t, "bob", time.Hour)

	tests := []struct {
		name string
		kf   keyfunc.KeyFunc
		md   []string // the call's metadata
		want []codes.Code
	}{
		{"api key: known", apiKey, []string{"x-api-key", "key-alice"}, []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted}},
		{"api key: another known key counts apart", apiKey, []string{"x-api-key", "key-bob"}, []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted}},
		{"api key: unknown", apiKey, []string{"x-api-key", "made-up"}, []codes.Code{codes.Unauthenticated, codes.Unauthenticated}},
		{"api key: missing", apiKey, nil, []codes.Code{codes.Unauthenticated}},
		{"api key: huge", apiKey, []string{"x-api-key", huge}, []codes.Code{codes.Unauthenticated}},
		{"api key: sent twice", apiKey, []string{"x-api-key", "key-alice", "x-api-key", "key-bob"}, []codes.Code{codes.Unauthenticated}},
		{"jwt: valid", bearer, []string{"authorization", "Bearer " + alice}, []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted}},
		{"jwt: another subject counts apart", bearer, []string{"authorization", "Bearer " + bob}, []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted}},
		{"jwt: expired", bearer, []string{"authorization", "Bearer " + token(t, "alice", -time.Hour)}, []codes.Code{codes.Unauthenticated}},
		{"jwt: malformed", bearer, []string{"authorization", "Bearer not.a.token"}, []codes.Code{codes.Unauthenticated}},
		{"jwt: forged signature", bearer, []string{"authorization", "Bearer " + alice[:len(alice)-4] + "AAAA"}, []codes.Code{codes.Unauthenticated}},
		{"jwt: huge", bearer, []string{"authorization", "Bearer " + huge}, []codes.Code{codes.Unauthenticated}},
		{"jwt: missing", bearer, nil, []codes.Code{codes.Unauthenticated}},
		{"jwt: basic scheme", bearer, []string{"authorization", "Basic YWxpY2U6cHc="}, []codes.Code{codes.Unauthenticated}},
		{"first of jwt, key, ip: a forged token falls through to the address",
			keyfunc.FirstOf(bearer, apiKey, keyfunc.IP()), []string{"authorization", "Bearer forged"},
			[]codes.Code{codes.OK, codes.OK, codes.ResourceExhausted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := serveLimited(t, newLimiter(t, algorithms.FixedWindow, algorithms.PerMinute(2)), grpclimit.WithKeyFunc(tt.kf))
			c := dial(t, addr)
			for i, want := range tt.want {
				code, header, trailer, err := call(t, c, tt.md...)
				if code != want {
					t.Fatalf("call %d: %v, want %v", i, err, want)
				}
				var values []string
				for _, md := range []map[string][]string{header, trailer} {
					for _, v := range md {
						values = append(values, v...)
					}
				}
				if err != nil && leaks([]string{"key-alice", "key-bob", "made-up", alice, bob, "not.a.token"},
					append(values, status.Convert(err).Message())...) {
					t.Fatalf("call %d: a credential leaked: %v %v %v", i, err, header, trailer)
				}
			}
		})
	}
}

// TestForwardedFor: x-forwarded-for is believed only from a trusted peer.
// From an untrusted one, every forged address shares the peer's quota; from
// a trusted one each client counts apart; forwarding metadata past 8 KiB is
// refused with InvalidArgument either way.
func TestForwardedFor(t *testing.T) {
	loopback := netip.MustParsePrefix("127.0.0.0/8")
	elsewhere := netip.MustParsePrefix("192.0.2.0/24")
	long := strings.Repeat("198.51.100.1, ", 8<<10/14+1) // past the 8 KiB of forwarding metadata a call may carry
	tests := []struct {
		name    string
		trusted netip.Prefix
		xff     []string // one call each
		want    []codes.Code
	}{
		{"untrusted peer: forged addresses share its quota", elsewhere,
			[]string{"203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4"},
			[]codes.Code{codes.OK, codes.OK, codes.ResourceExhausted, codes.ResourceExhausted}},
		{"trusted peer: each client its own quota", loopback,
			[]string{"203.0.113.1", "203.0.113.2", "203.0.113.1", "203.0.113.1"},
			[]codes.Code{codes.OK, codes.OK, codes.OK, codes.ResourceExhausted}},
		{"trusted peer: IPv6 clients by /64", loopback,
			[]string{"2001:db8:1:2::1", "2001:db8:1:2::99", "2001:db8:1:2:ffff::1", "2001:db8:1:3::1"},
			[]codes.Code{codes.OK, codes.OK, codes.ResourceExhausted, codes.OK}},
		{"trusted peer: garbage lands on the peer", loopback,
			[]string{"not an address", "also not", "nope"},
			[]codes.Code{codes.OK, codes.OK, codes.ResourceExhausted}},
		{"untrusted peer: huge", elsewhere, []string{long}, []codes.Code{codes.InvalidArgument}},
		{"trusted peer: huge", loopback, []string{long}, []codes.Code{codes.InvalidArgument}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := serveLimited(t, newLimiter(t, algorithms.FixedWindow, algorithms.PerMinute(2)),
				grpclimit.WithKeyFunc(keyfunc.IP(keyfunc.TrustProxies(tt.trusted))))
			c := dial(t, addr)
			for i, xff := range tt.xff {
				if code, _, _, err := call(t, c, "x-forwarded-for", xff); code != tt.want[i] {
					t.Fatalf("call %d (x-forwarded-for %.40q): %v, want %v", i, xff, err, tt.want[i])
				}
			}
		})
	}
}
