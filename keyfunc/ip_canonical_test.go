package keyfunc

import (
	"testing"
)

// referenceKey is IP's key for a RemoteAddr read the general way, with
// no trusted proxies: parsed, normalized and formatted.
func referenceKey(remote string) (string, bool) {
	a, ok := parseRemoteAddr(remote)
	if !ok {
		return "", false
	}
	return ipKey(a, DefaultIPv6Prefix), true
}

func TestCanonicalIPv4(t *testing.T) {
	// The shortcut for a canonical IPv4 RemoteAddr gives the key the
	// general parse gives, and leaves every other form to it.
	for _, tt := range []struct {
		remote string
		fast   bool // canonicalIPv4 takes it
	}{
		{"10.0.0.1:40000", true},
		{"203.0.113.7", true},
		{"0.0.0.0:0", true},
		{"255.255.255.255:65535", true},
		{"1.2.3.4:", true},
		{"1.2.3.4:999999", true},
		{"010.0.0.1:1", false},
		{"1.2.3.04:1", false},
		{"1.2.3.0004:1", false},
		{"256.1.1.1:1", false},
		{"1.2.3:4", false},
		{"1.2.3.4.5:6", false},
		{"1..2.3:4", false},
		{"1.2.3.4567:8", false},
		{"1.2.3.4:80:90", false},
		{"1.2.3.4:8]", false},
		{"1.2.3.4 :1", false},
		{"+1.2.3.4:1", false},
		{"1.2.3.4%eth0:1", false},
		{"::ffff:1.2.3.4", false},
		{"[::ffff:1.2.3.4]:80", false},
		{"[2001:db8::1]:443", false},
		{"", false},
		{":80", false},
	} {
		t.Run(tt.remote, func(t *testing.T) {
			host, a, fast := canonicalIPv4(tt.remote)
			if fast != tt.fast {
				t.Fatalf("canonicalIPv4 took it: %v, want %v", fast, tt.fast)
			}
			want, wantOK := referenceKey(tt.remote)
			if fast && (!wantOK || "ip:"+host != want || "ip:"+a.String() != want) {
				t.Errorf("shortcut: host %q, address %v; the general parse's key %q (ok %v)", host, a, want, wantOK)
			}
			got, err := IP()(newRequest(tt.remote, nil))
			if (err == nil) != wantOK || got != want {
				t.Errorf("IP() = %q, %v; want %q (ok %v)", got, err, want, wantOK)
			}
		})
	}
}

func TestCanonicalIPv4TrustedPeer(t *testing.T) {
	// A trusted proxy's canonical address is not the key: its forwarding
	// header is read, as without the shortcut.
	kf := IP(TrustProxies(trusted...))
	got, err := kf(newRequest("10.0.0.1:40000", xff("198.51.100.1")))
	if err != nil || got != "ip:198.51.100.1" {
		t.Errorf("key %q, %v; want ip:198.51.100.1", got, err)
	}
}

func FuzzCanonicalIPv4(f *testing.F) {
	for _, s := range []string{"10.0.0.1:40000", "1.2.3.4", "01.2.3.4:5", "1.2.3.4:5:6", "[::1]:80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, remote string) {
		host, a, ok := canonicalIPv4(remote)
		if !ok {
			return
		}
		want, wantOK := referenceKey(remote)
		if !wantOK || "ip:"+host != want || "ip:"+a.String() != want {
			t.Fatalf("%q: shortcut host %q, address %v; the general parse's key %q (ok %v)", remote, host, a, want, wantOK)
		}
	})
}
