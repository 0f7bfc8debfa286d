package keyfunc_test

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"net/netip"

	"github.com/redlimit/redlimit/keyfunc"
)

// Behind a load balancer in 10.0.0.0/8, X-Forwarded-For is walked from the
// right; what a client writes at the left end is never believed.
func ExampleIP_trustedProxies() {
	key := keyfunc.IP(keyfunc.TrustProxies(netip.MustParsePrefix("10.0.0.0/8")))

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.7:41234" // the load balancer
	r.Header.Set("X-Forwarded-For", "1.2.3.4, 203.0.113.9")
	fmt.Println(key(r))

	// The same header straight from a client is ignored.
	r.RemoteAddr = "198.51.100.20:5555"
	fmt.Println(key(r))

	// IPv6 clients are keyed by their /64.
	r.RemoteAddr = "[2001:db8:1:2::abcd]:443"
	fmt.Println(key(r))
	// Output:
	// ip:203.0.113.9 <nil>
	// ip:198.51.100.20 <nil>
	// ip:2001:db8:1:2::/64 <nil>
}

// The raw key never leaves the request: the limiter sees only its hash.
// KnownAPIKey turns a made-up key into an error, so it cannot buy a fresh
// quota.
func ExampleAPIKey() {
	issued := map[string]bool{keyfunc.HashAPIKey("sk_live_abc123"): true}
	key := keyfunc.APIKey("X-API-Key", keyfunc.KnownAPIKey(func(raw string) bool {
		return issued[keyfunc.HashAPIKey(raw)]
	}))

	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-API-Key", "sk_live_abc123")
	k, _ := key(r)
	fmt.Println(k)
	fmt.Println(k == "key:"+keyfunc.HashAPIKey("sk_live_abc123"))

	_, err := key(httptest.NewRequest("GET", "/", nil))
	fmt.Println(errors.Is(err, keyfunc.ErrNoAPIKey))

	r.Header.Set("X-API-Key", "sk_live_made_up")
	_, err = key(r)
	fmt.Println(errors.Is(err, keyfunc.ErrInvalidAPIKey))
	// Output:
	// key:e9982364fd73c3ea5cfbc3c032589e2b
	// true
	// true
	// true
}

// Callers with an issued API key are keyed by it, everyone else by where
// they come from (a verified JWT's subject, from the jwtkey module, goes
// first in such a chain).
func ExampleFirstOf() {
	key := keyfunc.FirstOf(
		keyfunc.APIKey("X-API-Key", keyfunc.KnownAPIKey(func(raw string) bool { return raw == "sk_live_abc123" })),
		keyfunc.IP(),
	)

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "203.0.113.9:1234"
	fmt.Println(key(r))

	r.Header.Set("X-API-Key", "sk_live_made_up") // falls through
	fmt.Println(key(r))

	// A per-route limit for each caller.
	perRoute := keyfunc.Join(keyfunc.Route, key)
	fmt.Println(perRoute(r))
	// Output:
	// ip:203.0.113.9 <nil>
	// ip:203.0.113.9 <nil>
	// path:/|ip:203.0.113.9 <nil>
}
