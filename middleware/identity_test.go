package middleware

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
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
			store := must(memstore.New(memstore.WithClock(clock.Now)))
			lim := newLimiter(t, store, algorithms.FixedWindow, algorithms.Limit{Rate: 1, Period: time.Minute})
			h := mustNew(t, lim, WithKeyFunc(tt.kf), withClock(clock.Now))(&okHandler{})
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

// One request from each of 4,096 /64s of one /48, at 1 a minute per /64 and
// 100 a minute per /48 stacked: rotating /64s buys 100 requests, not 4,096;
// a client in another /48 is untouched.
func TestIPv6RotationInsideA48(t *testing.T) {
	clock := newFakeClock()
	store := must(memstore.New(memstore.WithClock(clock.Now)))
	per64 := mustNew(t, newLimiter(t, store, algorithms.SlidingWindowCounter, algorithms.PerMinute(1)),
		WithKeyFunc(keyfunc.IP(keyfunc.IPv6Prefix(64))), withClock(clock.Now))
	per48 := mustNew(t, newLimiter(t, store, algorithms.SlidingWindowCounter, algorithms.PerMinute(100)),
		WithKeyFunc(keyfunc.IP(keyfunc.IPv6Prefix(48))), withClock(clock.Now))
	next := &okHandler{}
	h := per48(per64(next))

	base := netip.MustParseAddr("2001:db8:7::").As16()
	passed := 0
	for i := range 4096 {
		a := base
		a[6], a[7] = byte(i>>8), byte(i) // the /64 inside the /48
		a[15] = byte(i) | 1              // and some host inside it
		if rec := from(h, "/", netip.AddrPortFrom(netip.AddrFrom16(a), 4000).String()); rec.Code == http.StatusOK {
			passed++
		}
	}
	if passed != 100 || next.count() != 100 {
		t.Fatalf("%d of 4096 /64s passed (handler ran %d times), want 100", passed, next.count())
	}
	if rec := from(h, "/", "[2001:db8:8::1]:4000"); rec.Code != http.StatusOK {
		t.Fatalf("a client in another /48: status %d", rec.Code)
	}
	clock.Advance(2 * time.Minute)
	if rec := from(h, "/", "[2001:db8:7:1::1]:4000"); rec.Code != http.StatusOK {
		t.Fatalf("after the window: status %d", rec.Code)
	}
}
