package keyfunc

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzIPForwarded feeds arbitrary forwarding headers (lines split on "\n")
// to IP. It checks that an untrusted peer is always its own key, that a
// trusted peer always yields a valid normalized key, and, for inputs
// within the caps, that the walk agrees with a plain reference walk.
func FuzzIPForwarded(f *testing.F) {
	f.Add("198.51.100.1, 203.0.113.5, 10.0.0.2", "", false)
	f.Add("198.51.100.1, garbage, 10.0.0.2", "", false)
	f.Add("198.51.100.1\n203.0.113.5, 10.0.0.2", "", false)
	f.Add("::ffff:10.0.0.2, fe80::1%eth0", "", false)
	f.Add("", `for=198.51.100.1, for="[2001:db8:cafe::17]:4711", for=10.0.0.2`, false)
	f.Add("203.0.113.5", `for=unknown;proto=http, for=_hidden`, true)
	f.Add("", `for=192.0.2.60;ext="a,\"b", For="192.0.2.61:80"`, false)

	kf := IP(TrustProxies(trusted...))
	f.Fuzz(func(t *testing.T, xffText, fwdText string, forwardedOnly bool) {
		header := map[string][]string{}
		if xffText != "" {
			header["X-Forwarded-For"] = strings.Split(xffText, "\n")
		}
		if fwdText != "" {
			header["Forwarded"] = strings.Split(fwdText, "\n")
		}
		opts := []IPOption{TrustProxies(trusted...)}
		if forwardedOnly {
			opts = append(opts, ForwardedHeaderOnly())
		}
		trustedKF := IP(opts...)

		// An untrusted peer is the client, whatever it claims.
		if got, err := kf(newRequest("203.0.113.7:1234", header)); err != nil || got != "ip:203.0.113.7" {
			t.Fatalf("untrusted peer: %q, %v", got, err)
		}

		got, err := trustedKF(newRequest("10.0.0.1:1234", header))
		if err != nil {
			t.Fatalf("trusted peer: %v", err)
		}
		checkIPKey(t, got)

		switch {
		case xffText != "" && !forwardedOnly:
			if want, ok := referenceXFF(header["X-Forwarded-For"]); ok && got != want {
				t.Fatalf("X-Forwarded-For walk gave %q, reference %q", got, want)
			}
		case fwdText != "":
			if want, ok := referenceForwarded(header["Forwarded"]); ok && got != want {
				t.Fatalf("Forwarded walk gave %q, reference %q", got, want)
			}
		}
	})
}

// checkIPKey fails unless key is "ip:" and a normalized IPv4 address or a
// masked IPv6 /64.
func checkIPKey(t *testing.T, key string) {
	t.Helper()
	rest, ok := strings.CutPrefix(key, "ip:")
	if !ok {
		t.Fatalf("key %q lacks the ip: namespace", key)
	}
	if a, err := netip.ParseAddr(rest); err == nil {
		if !a.Is4() {
			t.Fatalf("key %q: IPv6 address not keyed by prefix", key)
		}
		return
	}
	p, err := netip.ParsePrefix(rest)
	if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || p.Bits() != DefaultIPv6Prefix || p != p.Masked() {
		t.Fatalf("key %q is not a normalized IPv6 /64", key)
	}
}

// referenceXFF walks X-Forwarded-For the plain way: join, split, walk from
// the right. It reports false for inputs beyond the caps, where the real
// walk stops early by design.
func referenceXFF(lines []string) (string, bool) {
	joined := strings.Join(lines, ",")
	if len(joined) >= maxForwardedBytes/2 {
		return "", false
	}
	var entries []string
	for _, e := range strings.Split(joined, ",") {
		if e = strings.Trim(e, " \t"); e != "" {
			entries = append(entries, e)
		}
	}
	if len(entries) > maxHops {
		return "", false
	}
	return referenceWalk(entries, parseXFFEntry), true
}

// referenceForwarded splits Forwarded left to right, which agrees with the
// real right-to-left scan when every line's quotes pair up; it reports
// false for other inputs and those beyond the caps.
func referenceForwarded(lines []string) (string, bool) {
	var elems []string
	size := 0
	for _, l := range lines {
		if strings.Count(l, `"`)%2 != 0 || strings.Contains(l, `\`) {
			return "", false
		}
		size += len(l) + 1
		for l != "" {
			var e string
			e, l = cutUnquoted(l, ',')
			if e = strings.Trim(e, " \t"); e != "" {
				elems = append(elems, e)
			}
		}
	}
	if size >= maxForwardedBytes/2 || len(elems) > maxHops {
		return "", false
	}
	return referenceWalk(elems, parseForwardedElement), true
}

// referenceWalk walks entries from the right from the trusted peer 10.0.0.1:
// past trusted addresses, stopping at the first untrusted one or at one
// that does not parse, and returns the key of the last address reached.
func referenceWalk(entries []string, parse func(string) (netip.Addr, bool)) string {
	last := netip.MustParseAddr("10.0.0.1")
	for i := len(entries) - 1; i >= 0; i-- {
		a, ok := parse(entries[i])
		if !ok {
			break
		}
		last = a
		if !inTrusted(a) {
			break
		}
	}
	return ipKey(last, DefaultIPv6Prefix)
}

func inTrusted(a netip.Addr) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
