package keyfunc

import "testing"

func TestIPAllocs(t *testing.T) {
	// A client seen lately gets its key without an allocation: the key is
	// built in a stack buffer and taken from the process's table of recent
	// keys. The key is the same as ever.
	trust := TrustProxies(trusted...)
	for _, tt := range []struct {
		name   string
		kf     KeyFunc
		remote string
		header map[string][]string
		want   string
	}{
		{"ipv4", IP(), "203.0.113.7:51234", nil, "ip:203.0.113.7"},
		{"ipv6 prefix", IP(), "[2001:db8:1:2::7]:51234", nil, "ip:2001:db8:1:2::/64"},
		{"ipv6 whole", IP(IPv6Prefix(128)), "[2001:db8:1:2::7]:51234", nil, "ip:2001:db8:1:2::7"},
		{"mapped ipv4", IP(), "[::ffff:203.0.113.8]:1", nil, "ip:203.0.113.8"},
		{"trusted chain", IP(trust), "10.0.0.1:51234", xff("198.51.100.1, 10.0.0.2"), "ip:198.51.100.1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRequest(tt.remote, tt.header)
			if got, err := tt.kf(r); err != nil || got != tt.want {
				t.Fatalf("key %q, %v; want %q", got, err, tt.want)
			}
			allocs := testing.AllocsPerRun(100, func() {
				if got, _ := tt.kf(r); got != tt.want {
					t.Fatalf("key %q, want %q", got, tt.want)
				}
			})
			if allocs != 0 {
				t.Errorf("%.1f allocations per key of a client seen lately, want 0", allocs)
			}
		})
	}
}
