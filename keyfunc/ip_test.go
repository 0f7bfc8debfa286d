package keyfunc

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	chimw "github.com/go-chi/chi/v5/middleware"

	"github.com/redlimit/redlimit/algorithms"
)

func TestIP(t *testing.T) {
	trust := TrustProxies(trusted...)
	tests := []struct {
		name   string
		remote string
		header map[string][]string
		opts   []IPOption
		want   string
	}{
		{"plain IPv4", "203.0.113.7:1234", nil, nil, "ip:203.0.113.7"},
		{"bare RemoteAddr", "203.0.113.7", nil, nil, "ip:203.0.113.7"},
		{"XFF from untrusted peer ignored", "203.0.113.7:1234", xff("198.51.100.1"), []IPOption{trust}, "ip:203.0.113.7"},
		{"XFF ignored without TrustProxies", "10.0.0.1:1234", xff("198.51.100.1"), nil, "ip:10.0.0.1"},
		{"Forwarded from untrusted peer ignored", "203.0.113.7:1234", fwd("for=198.51.100.1"), []IPOption{trust}, "ip:203.0.113.7"},
		{"trusted peer without headers", "10.0.0.1:1234", nil, []IPOption{trust}, "ip:10.0.0.1"},
		{"chain walked from the right", "10.0.0.1:1234", xff("198.51.100.1, 203.0.113.5, 10.0.0.2"), []IPOption{trust}, "ip:203.0.113.5"},
		{"all trusted gives leftmost trusted", "10.0.0.1:1234", xff("10.1.1.1, 192.168.1.1"), []IPOption{trust}, "ip:10.1.1.1"},
		{"malformed entry stops at last trusted", "10.0.0.1:1234", xff("198.51.100.1, garbage, 10.0.0.2"), []IPOption{trust}, "ip:10.0.0.2"},
		{"malformed rightmost gives peer", "10.0.0.1:1234", xff("198.51.100.1, 999.1.1.1"), []IPOption{trust}, "ip:10.0.0.1"},
		{"repeated lines joined in order", "10.0.0.1:1234", xff("198.51.100.1", "203.0.113.5, 10.0.0.2"), []IPOption{trust}, "ip:203.0.113.5"},
		{"repeated lines walk across lines", "10.0.0.1:1234", xff("198.51.100.9, 10.0.0.3", "10.0.0.2"), []IPOption{trust}, "ip:198.51.100.9"},
		{"empty entries skipped", "10.0.0.1:1234", xff("203.0.113.5,, 10.0.0.2 ,"), []IPOption{trust}, "ip:203.0.113.5"},
		{"empty XFF gives peer", "10.0.0.1:1234", xff(""), []IPOption{trust}, "ip:10.0.0.1"},
		{"XFF IPv4 with port", "10.0.0.1:1234", xff("203.0.113.5:4711"), []IPOption{trust}, "ip:203.0.113.5"},
		{"XFF bracketed IPv6 with port", "10.0.0.1:1234", xff("[2001:db8:1:2::5]:4711"), []IPOption{trust}, "ip:2001:db8:1:2::/64"},
		{"XFF bracketed IPv6", "10.0.0.1:1234", xff("[2001:db8:1:2::5]"), []IPOption{trust}, "ip:2001:db8:1:2::/64"},
		{"XFF tab separated", "10.0.0.1:1234", xff("198.51.100.1,\t203.0.113.5"), []IPOption{trust}, "ip:203.0.113.5"},
		{"Forwarded simple", "10.0.0.1:1234", fwd("for=192.0.2.60;proto=http;by=203.0.113.43"), []IPOption{trust}, "ip:192.0.2.60"},
		{"Forwarded quoted IPv6 with port", "10.0.0.1:1234", fwd(`for="[2001:db8:cafe::17]:4711"`), []IPOption{trust}, "ip:2001:db8:cafe::/64"},
		{"Forwarded quoted IPv4 with port", "10.0.0.1:1234", fwd(`for="192.0.2.60:8080"`), []IPOption{trust}, "ip:192.0.2.60"},
		{"Forwarded obfuscated port", "10.0.0.1:1234", fwd(`for="[2001:db8::1]:_p1"`), []IPOption{trust}, "ip:2001:db8::/64"},
		{"Forwarded chain from the right", "10.0.0.1:1234", fwd("for=198.51.100.1, for=192.0.2.60, for=10.0.0.2"), []IPOption{trust}, "ip:192.0.2.60"},
		{"Forwarded repeated lines", "10.0.0.1:1234", fwd("for=198.51.100.1", "for=192.0.2.60", "for=10.0.0.2"), []IPOption{trust}, "ip:192.0.2.60"},
		{"Forwarded name case-insensitive", "10.0.0.1:1234", fwd("For=192.0.2.60"), []IPOption{trust}, "ip:192.0.2.60"},
		{"Forwarded unknown ends walk", "10.0.0.1:1234", fwd("for=198.51.100.1, for=unknown, for=10.0.0.2"), []IPOption{trust}, "ip:10.0.0.2"},
		{"Forwarded obfuscated ends walk", "10.0.0.1:1234", fwd("for=198.51.100.1, for=_hidden"), []IPOption{trust}, "ip:10.0.0.1"},
		{"Forwarded quoted comma inside element", "10.0.0.1:1234", fwd(`for=192.0.2.60;ext="a,b", for=10.0.0.2`), []IPOption{trust}, "ip:192.0.2.60"},
		{"Forwarded element without for ends walk", "10.0.0.1:1234", fwd("for=198.51.100.1, proto=https"), []IPOption{trust}, "ip:10.0.0.1"},
		{"Forwarded duplicate for ends walk", "10.0.0.1:1234", fwd("for=192.0.2.1;for=192.0.2.2"), []IPOption{trust}, "ip:10.0.0.1"},
		{"Forwarded unterminated bracket", "10.0.0.1:1234", fwd(`for="[2001:db8::1"`), []IPOption{trust}, "ip:10.0.0.1"},
		{"Forwarded bad port", "10.0.0.1:1234", fwd(`for="192.0.2.60:123456"`), []IPOption{trust}, "ip:10.0.0.1"},
		{"XFF preferred over Forwarded", "10.0.0.1:1234",
			map[string][]string{"X-Forwarded-For": {"203.0.113.5"}, "Forwarded": {"for=192.0.2.60"}}, []IPOption{trust}, "ip:203.0.113.5"},
		{"ForwardedHeaderOnly ignores XFF", "10.0.0.1:1234",
			map[string][]string{"X-Forwarded-For": {"203.0.113.5"}, "Forwarded": {"for=192.0.2.60"}}, []IPOption{trust, ForwardedHeaderOnly()}, "ip:192.0.2.60"},
		{"ForwardedHeaderOnly without Forwarded gives peer", "10.0.0.1:1234", xff("203.0.113.5"), []IPOption{trust, ForwardedHeaderOnly()}, "ip:10.0.0.1"},
		{"IPv4-mapped RemoteAddr folded", "[::ffff:203.0.113.7]:80", nil, nil, "ip:203.0.113.7"},
		{"IPv4-mapped trusted peer folded", "[::ffff:10.0.0.1]:80", xff("203.0.113.5"), []IPOption{trust}, "ip:203.0.113.5"},
		{"IPv4-mapped XFF entry folded", "10.0.0.1:80", xff("::ffff:203.0.113.5"), []IPOption{trust}, "ip:203.0.113.5"},
		{"IPv4-mapped alias of a trusted hop", "10.0.0.1:80", xff("203.0.113.5, ::ffff:10.0.0.2"), []IPOption{trust}, "ip:203.0.113.5"},
		{"IPv4-mapped Forwarded folded", "10.0.0.1:80", fwd(`for="[::ffff:192.0.2.60]"`), []IPOption{trust}, "ip:192.0.2.60"},
		{"zone dropped from RemoteAddr", "[fe80::1%eth0]:80", nil, []IPOption{IPv6Prefix(128)}, "ip:fe80::1"},
		{"zone dropped from XFF entry", "10.0.0.1:80", xff("fe80::1%eth0"), []IPOption{trust, IPv6Prefix(128)}, "ip:fe80::1"},
		{"zoned alias of a trusted hop", "10.0.0.1:80", xff("203.0.113.5, fd00::2%eth0"), []IPOption{trust}, "ip:203.0.113.5"},
		{"trusted IPv6 peer", "[fd00::1]:80", xff("2001:db8:1:2::9"), []IPOption{trust}, "ip:2001:db8:1:2::/64"},
		{"IPv6 keyed by /64", "[2001:db8:1:2::1]:80", nil, nil, "ip:2001:db8:1:2::/64"},
		{"IPv6 custom /48", "[2001:db8:1:2::1]:80", nil, []IPOption{IPv6Prefix(48)}, "ip:2001:db8:1::/48"},
		{"IPv6 /128 is the address", "[2001:db8:1:2::1]:80", nil, []IPOption{IPv6Prefix(128)}, "ip:2001:db8:1:2::1"},
		{"IPv6 /32 is the shortest", "[2001:db8:1:2::1]:80", nil, []IPOption{IPv6Prefix(MinIPv6Prefix)}, "ip:2001:db8::/32"},
		{"IPv6Prefix leaves IPv4 alone", "203.0.113.7:1", nil, []IPOption{IPv6Prefix(48)}, "ip:203.0.113.7"},
		{"IPv4-mapped trust prefix folded", "10.0.0.1:80", xff("203.0.113.5"),
			[]IPOption{TrustProxies(netip.MustParsePrefix("::ffff:10.0.0.0/104"))}, "ip:203.0.113.5"},
		{"TrustProxies given twice adds up", "192.168.0.1:80", xff("203.0.113.5, 10.0.0.2"),
			[]IPOption{TrustProxies(trusted[0]), TrustProxies(trusted[1])}, "ip:203.0.113.5"},
		{"nil option skipped", "203.0.113.7:1234", nil, []IPOption{nil}, "ip:203.0.113.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kf, err := NewIP(tt.opts...)
			if err != nil {
				t.Fatalf("NewIP: %v", err)
			}
			got, err := kf(newRequest(tt.remote, tt.header))
			if err != nil {
				t.Fatalf("IP() error: %v", err)
			}
			if got != tt.want {
				t.Errorf("IP() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestIPErrors(t *testing.T) {
	for _, remote := range []string{"", "not-an-ip:80", "[::1", "example.com:80", "1.2.3.4.5"} {
		t.Run(remote, func(t *testing.T) {
			key, err := IP()(newRequest(remote, nil))
			if !errors.Is(err, ErrNoClientIP) {
				t.Errorf("IP() = %q, %v; want ErrNoClientIP", key, err)
			}
		})
	}
}

func TestIPInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  IPOption
	}{
		{"IPv6Prefix below 0", IPv6Prefix(-1)},
		{"IPv6Prefix 0: every IPv6 client in one bucket", IPv6Prefix(0)},
		{"IPv6Prefix 1", IPv6Prefix(1)},
		{"IPv6Prefix 31, just below the shortest", IPv6Prefix(MinIPv6Prefix - 1)},
		{"IPv6Prefix above 128", IPv6Prefix(129)},
		{"zero prefix", TrustProxies(netip.Prefix{})},
		{"prefix with bad length", TrustProxies(netip.PrefixFrom(netip.MustParseAddr("10.0.0.0"), 33))},
		{"IPv4 /0 trusts everyone", TrustProxies(netip.MustParsePrefix("0.0.0.0/0"))},
		{"IPv6 /0 trusts everyone", TrustProxies(netip.MustParsePrefix("::/0"))},
		{"mapped /96 trusts every IPv4", TrustProxies(netip.MustParsePrefix("::ffff:0.0.0.0/96"))},
		{"ClientAddrFrom nil", ClientAddrFrom(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewIP(tt.opt); !errors.Is(err, algorithms.ErrInvalidOption) {
				t.Errorf("NewIP error = %v, want algorithms.ErrInvalidOption", err)
			}
			key, err := IP(tt.opt)(newRequest("203.0.113.7:1", nil))
			if !errors.Is(err, algorithms.ErrInvalidOption) || key != "" {
				t.Errorf("IP() = %q, %v; want algorithms.ErrInvalidOption", key, err)
			}
		})
	}
}

func TestIPv6PrefixGrouping(t *testing.T) {
	kf := IP()
	key := func(remote string) string {
		t.Helper()
		k, err := kf(newRequest(remote, nil))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a, b := key("[2001:db8:1:2::1]:1"), key("[2001:db8:1:2:ffff:ffff:ffff:ffff]:2")
	if a != b {
		t.Errorf("one /64 gave two keys: %q and %q", a, b)
	}
	if c := key("[2001:db8:1:3::1]:1"); c == a {
		t.Errorf("two /64s gave one key %q", c)
	}

	kf = IP(IPv6Prefix(56))
	if x, y := key("[2001:db8:1:2::1]:1"), key("[2001:db8:1:ff::1]:1"); x != y {
		t.Errorf("one /56 gave two keys: %q and %q", x, y)
	}
	if x, y := key("[2001:db8:1:2::1]:1"), key("[2001:db8:1:100::1]:1"); x == y {
		t.Errorf("two /56s gave one key %q", x)
	}
}

// TestIPBoundedWork checks the results when headers are far beyond the
// caps: the walk must stop at a trusted address, never reach the spoofed
// left end.
func TestIPBoundedWork(t *testing.T) {
	const mb = 1 << 20
	spoofed := strings.Repeat("198.51.100.1, ", mb/14)
	trustedRun := strings.Repeat("10.0.0.3, ", mb/10)
	tests := []struct {
		name   string
		header map[string][]string
		want   string
	}{
		{"1 MB of spoofed entries, client at the right", xff(spoofed + "203.0.113.5, 10.0.0.2"), "ip:203.0.113.5"},
		{"1 MB of trusted entries stops at the hop cap", xff("198.51.100.1, " + trustedRun + "10.0.0.2"), "ip:10.0.0.3"},
		{"1 MB entry without commas", xff(strings.Repeat("1", mb)), "ip:10.0.0.1"},
		{"1 MB of commas and spaces", xff("198.51.100.1" + strings.Repeat(", ", mb/2)), "ip:10.0.0.1"},
		{"1 MB of backslashes and quotes", fwd("for=198.51.100.1, " + strings.Repeat(`\\\"`, mb/3) + `", for=10.0.0.2`), "ip:10.0.0.2"},
		{"many header lines", xff(append(make([]string, 100000), "198.51.100.1")...), "ip:198.51.100.1"},
		{"many empty lines before the client", xff(append([]string{"198.51.100.1"}, make([]string, 100000)...)...), "ip:10.0.0.1"},
		{"33 trusted hops", xff("198.51.100.1, " + strings.Repeat("10.0.0.3, ", 32) + "10.0.0.2"), "ip:10.0.0.3"},
		{"31 trusted hops then client", xff("198.51.100.1, 203.0.113.5, " + strings.Repeat("10.0.0.3, ", 30) + "10.0.0.2"), "ip:203.0.113.5"},
		{"1 MB Forwarded", fwd(strings.Repeat("for=198.51.100.1, ", mb/18) + "for=203.0.113.5, for=10.0.0.2"), "ip:203.0.113.5"},
	}
	kf := IP(TrustProxies(trusted...))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := kf(newRequest("10.0.0.1:1234", tt.header))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("IP() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestListScannerBudget counts the bytes the scanner examines.
func TestListScannerBudget(t *testing.T) {
	line := strings.Repeat("198.51.100.1, ", 1<<16)
	s := listScanner{lines: []string{line}, budget: maxForwardedBytes}
	n := 0
	for {
		if _, ok := s.next(); !ok {
			break
		}
		n++
	}
	if s.budget != 0 {
		t.Errorf("budget left %d, want it spent", s.budget)
	}
	if max := maxForwardedBytes / len("198.51.100.1, "); n > max+1 {
		t.Errorf("scanner yielded %d entries from %d bytes", n, maxForwardedBytes)
	}
}

func TestIPFromChi(t *testing.T) {
	fromChi := ClientAddrFrom(chimw.GetClientIPAddr)
	tests := []struct {
		name   string
		mw     func(http.Handler) http.Handler
		opts   []IPOption
		remote string
		header map[string][]string
		want   string
	}{
		{"chi ClientIPFromXFF decision reused", chimw.ClientIPFromXFF("10.0.0.0/8"), []IPOption{fromChi},
			"10.0.0.1:1", xff("198.51.100.1, 203.0.113.5"), "ip:203.0.113.5"},
		{"chi decision wins over TrustProxies", chimw.ClientIPFromXFF("10.0.0.0/8"), []IPOption{fromChi, TrustProxies(netip.MustParsePrefix("0.0.0.0/1"))},
			"10.0.0.1:1", xff("198.51.100.1, 203.0.113.5"), "ip:203.0.113.5"},
		{"chi IPv6 decision keyed by prefix", chimw.ClientIPFromXFF("10.0.0.0/8"), []IPOption{fromChi},
			"10.0.0.1:1", xff("2001:db8:1:2::7"), "ip:2001:db8:1:2::/64"},
		{"chi RemoteAddr decision, zone dropped", chimw.ClientIPFromRemoteAddr, []IPOption{fromChi, IPv6Prefix(128)},
			"[fe80::1%eth0]:1", nil, "ip:fe80::1"},
		{"no chi decision falls back", chimw.ClientIPFromXFF("10.0.0.0/8"), []IPOption{fromChi},
			"10.0.0.1:1", xff("garbage"), "ip:10.0.0.1"},
		{"chi decision unread without ClientAddrFrom", chimw.ClientIPFromXFF("10.0.0.0/8"), nil,
			"10.0.0.1:1", xff("198.51.100.1, 203.0.113.5"), "ip:10.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kf, err := NewIP(tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			var gotErr error
			r := chi.NewRouter()
			r.Use(tt.mw)
			r.Get("/", func(w http.ResponseWriter, r *http.Request) { got, gotErr = kf(r) })
			r.ServeHTTP(httptest.NewRecorder(), newRequest(tt.remote, tt.header))
			if gotErr != nil || got != tt.want {
				t.Errorf("IP() = %q, %v; want %q", got, gotErr, tt.want)
			}
		})
	}
}

// TestIPChiWithoutRemoteAddr checks that chi's decision, read through
// ClientAddrFrom, is used even when
// RemoteAddr itself would not parse.
func TestIPChiWithoutRemoteAddr(t *testing.T) {
	r := newRequest("bogus", nil)
	got, err := IP()(r)
	if !errors.Is(err, ErrNoClientIP) {
		t.Fatalf("without chi: %q, %v; want ErrNoClientIP", got, err)
	}
	// Set chi's decision through its own middleware on a parseable peer,
	// then break RemoteAddr before the key function runs.
	var ctx context.Context
	chimw.ClientIPFromRemoteAddr(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		ctx = r.Context()
	})).ServeHTTP(httptest.NewRecorder(), newRequest("203.0.113.7:1", nil))
	got, err = IP(ClientAddrFrom(chimw.GetClientIPAddr))(r.WithContext(ctx))
	if err != nil || got != "ip:203.0.113.7" {
		t.Errorf("with chi: %q, %v; want ip:203.0.113.7", got, err)
	}
}
