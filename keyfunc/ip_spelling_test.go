package keyfunc

import (
	"net/netip"
	"testing"
)

func TestIPSpellingsOfOneAddress(t *testing.T) {
	// Every spelling of a RemoteAddr that IP accepts gives the key of the
	// address it names, with and without trusted proxies (the peer's, or
	// the forwarded client's when the peer is trusted); a spelling that
	// names no single address is refused rather than keyed apart.
	const fwdClient = "198.51.100.9"
	for _, tt := range []struct {
		remote string
		addr   string // "" when the spelling must be refused
	}{
		{"1.2.3.4:80", "1.2.3.4"},
		{"1.2.3.4", "1.2.3.4"},
		{"1.2.3.4:", "1.2.3.4"},
		{"1.2.3.4:0", "1.2.3.4"},
		{"[::ffff:1.2.3.4]:80", "1.2.3.4"},
		{"::ffff:1.2.3.4", "1.2.3.4"},
		{"[::ffff:102:304]:80", "1.2.3.4"},
		{"[::ffff:1.2.3.4%eth0]:80", "1.2.3.4"},
		{"01.2.3.4:80", ""},
		{"1.2.3.4.5:80", ""},
		{"1.2.3.4%eth0:80", ""},
		{" 1.2.3.4:80", ""},
		{"1.2.3.4 :80", ""},
		{"256.1.1.1:1", ""},
		{"1.2.3:80", ""},
		{"0x1.2.3.4:80", ""},
	} {
		t.Run(tt.remote, func(t *testing.T) {
			for _, trust := range []bool{false, true} {
				var opts []IPOption
				want := "ip:" + tt.addr
				if trust {
					opts = append(opts, TrustProxies(netip.MustParsePrefix("1.2.3.4/32")))
					want = "ip:" + fwdClient
				}
				got, err := IP(opts...)(newRequest(tt.remote, xff(fwdClient)))
				if tt.addr == "" {
					if err == nil {
						t.Errorf("trust %v: key %q, want an error", trust, got)
					}
					continue
				}
				if err != nil || got != want {
					t.Errorf("trust %v: key %q, %v; want %q", trust, got, err, want)
				}
			}
		})
	}
}

func TestIPNeighbourNotTrusted(t *testing.T) {
	// The shortcut checks trust on the address it read: a peer one
	// address away from a trusted one is keyed by itself, its forwarding
	// header ignored, and the trusted one's header is read.
	kf := IP(TrustProxies(netip.MustParsePrefix("1.2.3.4/32")))
	for _, tt := range []struct{ remote, want string }{
		{"1.2.3.5:80", "ip:1.2.3.5"},
		{"1.2.3.3:80", "ip:1.2.3.3"},
		{"1.2.3.4:80", "ip:198.51.100.9"},
		{"1.2.3.40:80", "ip:1.2.3.40"},
		{"11.2.3.4:80", "ip:11.2.3.4"},
	} {
		got, err := kf(newRequest(tt.remote, xff("198.51.100.9")))
		if err != nil || got != tt.want {
			t.Errorf("%s: key %q, %v; want %q", tt.remote, got, err, tt.want)
		}
	}
}
