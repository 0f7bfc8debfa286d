package keyfunc

import (
	"net/http"
	"testing"
)

func benchKey(b *testing.B, kf KeyFunc, r *http.Request) {
	b.Helper()
	if _, err := kf(r); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kf(r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkIP(b *testing.B) {
	trust := TrustProxies(trusted...)
	b.Run("plain-ipv4", func(b *testing.B) {
		benchKey(b, IP(), newRequest("203.0.113.7:51234", nil))
	})
	b.Run("plain-ipv6", func(b *testing.B) {
		benchKey(b, IP(), newRequest("[2001:db8:1:2::7]:51234", nil))
	})
	b.Run("untrusted-peer-with-xff", func(b *testing.B) {
		benchKey(b, IP(trust), newRequest("203.0.113.7:51234", xff("198.51.100.1, 10.0.0.2")))
	})
	b.Run("trusted-xff-chain", func(b *testing.B) {
		benchKey(b, IP(trust), newRequest("10.0.0.1:51234", xff("198.51.100.1, 203.0.113.5, 192.168.1.1, 10.0.0.2")))
	})
	b.Run("trusted-forwarded-chain", func(b *testing.B) {
		benchKey(b, IP(trust), newRequest("10.0.0.1:51234",
			fwd(`for=198.51.100.1, for="[2001:db8:cafe::17]:4711";proto=https, for=10.0.0.2`)))
	})
}

func BenchmarkAPIKey(b *testing.B) {
	benchKey(b, APIKey("X-API-Key"), newRequest("203.0.113.7:1",
		map[string][]string{"X-API-Key": {"sk_live_4f9a1c2e8b7d6a5f4e3d2c1b0a9f8e7d"}}))
}

func BenchmarkJoinRouteIP(b *testing.B) {
	r := newRequest("203.0.113.7:1", nil)
	r.Pattern = "GET /search"
	benchKey(b, Join(Route, IP()), r)
}
