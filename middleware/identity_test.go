package middleware

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// Who is counted, end to end through the middleware and the memory store.
func TestIdentityThroughMiddleware(t *testing.T) {
	trusted := keyfunc.IP(keyfunc.TrustProxies(netip.MustParsePrefix("10.0.0.0/8")))
	tests := []struct {
		name    string
		kf      keyfunc.KeyFunc
		first   []string // addr, then header name/value pairs
		second  []string
		sharing bool // whether the second request finds the first's bucket spent
	}{
		{
			name:    "spoofed X-Forwarded-For from an untrusted peer is ignored",
			kf:      trusted,
			first:   []string{"203.0.113.9:1000", "X-Forwarded-For", "198.51.100.1"},
			second:  []string{"203.0.113.9:1001", "X-Forwarded-For", "198.51.100.2"},
			sharing: true,
		},
		{
			name:    "a trusted proxy's clients are told apart",
			kf:      trusted,
			first:   []string{"10.1.2.3:1000", "X-Forwarded-For", "198.51.100.1"},
			second:  []string{"10.1.2.3:1000", "X-Forwarded-For", "198.51.100.2"},
			sharing: false,
		},
		{
			name:    "a client cannot prepend a spoofed address behind a trusted proxy",
			kf:      trusted,
			first:   []string{"10.1.2.3:1000", "X-Forwarded-For", "198.51.100.1"},
			second:  []string{"10.1.2.3:1000", "X-Forwarded-For", "192.0.2.77, 198.51.100.1"},
			sharing: true,
		},
		{
			name:    "two addresses in one IPv6 /64 share a bucket",
			kf:      keyfunc.IP(),
			first:   []string{"[2001:db8:1:2::1]:1000"},
			second:  []string{"[2001:db8:1:2:ffff:ffff:ffff:fffe]:1000"},
			sharing: true,
		},
		{
			name:    "addresses in different /64s do not",
			kf:      keyfunc.IP(),
			first:   []string{"[2001:db8:1:2::1]:1000"},
			second:  []string{"[2001:db8:1:3::1]:1000"},
			sharing: false,
		},
		{
			name:    "an IPv4-mapped address is its IPv4 address",
			kf:      keyfunc.IP(),
			first:   []string{"[::ffff:192.0.2.1]:1000"},
			second:  []string{"192.0.2.1:1000"},
			sharing: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			store := algorithms.NewMemoryStore(algorithms.WithClock(clock.Now))
			lim := newLimiter(t, store, algorithms.FixedWindow, algorithms.Limit{Rate: 1, Period: time.Minute})
			h := New(lim, WithKeyFunc(tt.kf), withClock(clock.Now))(&okHandler{})
			if rec := from(h, "/", tt.first[0], tt.first[1:]...); rec.Code != http.StatusOK {
				t.Fatalf("first request: %d", rec.Code)
			}
			want := http.StatusOK
			if tt.sharing {
				want = http.StatusTooManyRequests
			}
			if rec := from(h, "/", tt.second[0], tt.second[1:]...); rec.Code != want {
				t.Fatalf("second request: %d, want %d", rec.Code, want)
			}
		})
	}
}
