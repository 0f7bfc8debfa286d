package keyfunc

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
)

func TestClientIPIn(t *testing.T) {
	allow := []netip.Prefix{
		netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("2001:db8:aa::/48"),
		netip.MustParsePrefix("::ffff:203.0.113.0/120"), // folded to 203.0.113.0/24
	}
	trust := TrustProxies(trusted...)
	tests := []struct {
		name   string
		remote string
		header map[string][]string
		opts   []IPOption
		want   bool
	}{
		{"peer in list", "198.51.100.7:1", nil, nil, true},
		{"peer outside list", "192.0.2.1:1", nil, nil, false},
		{"bare address", "198.51.100.7", nil, nil, true},
		{"IPv6 in /48", "[2001:db8:aa:1::5]:1", nil, nil, true},
		{"IPv6 outside /48", "[2001:db8:ab::5]:1", nil, nil, false},
		{"IPv4-mapped peer", "[::ffff:198.51.100.7]:1", nil, nil, true},
		{"mapped prefix folded", "203.0.113.9:1", nil, nil, true},
		{"unparseable RemoteAddr", "garbage", nil, nil, false},
		// An attacker writes an allowed address into X-Forwarded-For.
		{"spoofed XFF without TrustProxies", "192.0.2.1:1", xff("198.51.100.7"), nil, false},
		{"spoofed XFF from untrusted peer", "192.0.2.1:1", xff("198.51.100.7"), []IPOption{trust}, false},
		{"spoofed leftmost behind trusted proxy", "10.0.0.1:1", xff("198.51.100.7, 192.0.2.1"), []IPOption{trust}, false},
		{"client behind trusted proxy", "10.0.0.1:1", xff("192.0.2.1, 198.51.100.7"), []IPOption{trust}, true},
		{"proxy itself not in list", "10.0.0.1:1", nil, []IPOption{trust}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := ClientIPIn(allow, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if got := in(newRequest(tt.remote, tt.header)); got != tt.want {
				t.Errorf("ClientIPIn = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClientIPInRefuses(t *testing.T) {
	tests := []struct {
		name     string
		prefixes []netip.Prefix
		opts     []IPOption
	}{
		{"no prefixes", nil, nil},
		{"invalid prefix", []netip.Prefix{{}}, nil},
		{"every IPv4 address", []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}, nil},
		{"every IPv6 address", []netip.Prefix{netip.MustParsePrefix("::/0")}, nil},
		{"every mapped address", []netip.Prefix{netip.MustParsePrefix("::ffff:0.0.0.0/96")}, nil},
		{"invalid option", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, []IPOption{IPv6Prefix(200)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := ClientIPIn(tt.prefixes, tt.opts...)
			if !errors.Is(err, algorithms.ErrInvalidOption) || in != nil {
				t.Fatalf("ClientIPIn: %v, %v; want algorithms.ErrInvalidOption", in != nil, err)
			}
		})
	}
}
