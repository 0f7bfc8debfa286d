package keyfunc

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/intern"
)

// Bounds on the forwarding headers a client can make arbitrarily long.
// Real chains are a handful of hops and well under a kilobyte.
const (
	// maxForwardedBytes caps the header bytes examined, counted from the
	// right across all header lines.
	maxForwardedBytes = 8 << 10
	// maxHops caps the number of header entries walked.
	maxHops = 32
)

// DefaultIPv6Prefix is the prefix length IPv6 clients are keyed by unless
// [IPv6Prefix] says otherwise. A host usually owns a whole /64, so keying
// by full address would let it rotate addresses to escape its limit.
const DefaultIPv6Prefix = 64

// MinIPv6Prefix is the shortest prefix [IPv6Prefix] accepts. A shorter one
// would put whole regions' clients in one bucket (at /0, every IPv6 client
// shares a single key), so it is refused rather than taken as a setting.
const MinIPv6Prefix = 32

// IPOption configures [IP] and [NewIP].
type IPOption func(*ipConfig)

type ipConfig struct {
	trusted       []netip.Prefix
	v6Bits        int
	forwardedOnly bool
	chosen        func(context.Context) netip.Addr // ClientAddrFrom's, or nil
	err           error                            // the first invalid option
}

func (c *ipConfig) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// TrustProxies names the reverse proxies whose forwarding headers are
// believed. Headers are read only when RemoteAddr lies in one of the
// prefixes; the chain is then walked from the right past trusted
// addresses, and the first untrusted address is the client.
//
// IPv4-mapped IPv6 prefixes are folded to IPv4. An invalid prefix, or one
// of length 0 (which would let every client name its own address), makes
// the option invalid. It may be given more than once; prefixes add up.
func TrustProxies(prefixes ...netip.Prefix) IPOption {
	return func(c *ipConfig) {
		for _, p := range prefixes {
			if !p.IsValid() {
				c.fail(fmt.Errorf("%w: TrustProxies: invalid prefix %q", algorithms.ErrInvalidOption, p.String()))
				continue
			}
			a := p.Addr().WithZone("")
			bits := p.Bits()
			if a.Is4In6() && bits >= 96 {
				a, bits = a.Unmap(), bits-96
			}
			if bits == 0 {
				c.fail(fmt.Errorf("%w: TrustProxies: prefix %s trusts every address", algorithms.ErrInvalidOption, p))
				continue
			}
			c.trusted = append(c.trusted, netip.PrefixFrom(a, bits).Masked())
		}
	}
}

// IPv6Prefix sets the prefix length, [MinIPv6Prefix] (32) to 128, that
// IPv6 clients are keyed by (default [DefaultIPv6Prefix]). 128 keys each
// address on its own. A length outside 32..128, 0 included, makes the
// option invalid. IPv4 clients are always keyed by their full address.
func IPv6Prefix(bits int) IPOption {
	return func(c *ipConfig) {
		if bits < MinIPv6Prefix || bits > 128 {
			c.fail(fmt.Errorf("%w: IPv6Prefix(%d) is outside %d..128", algorithms.ErrInvalidOption, bits, MinIPv6Prefix))
			return
		}
		c.v6Bits = bits
	}
}

// ForwardedHeaderOnly makes trusted proxies' RFC 7239 Forwarded header the
// only one read, ignoring X-Forwarded-For.
//
// By default X-Forwarded-For is read when present and Forwarded only when
// it is not, because nearly every proxy writes X-Forwarded-For. The one
// header a proxy writes is the only one to believe: if yours writes only
// Forwarded, a client could otherwise send its own X-Forwarded-For and have
// it win, so use this option.
func ForwardedHeaderOnly() IPOption {
	return func(c *ipConfig) { c.forwardedOnly = true }
}

// ClientAddrFrom has [IP] take the client address that a middleware
// earlier in the chain chose and put in the request's context, when get
// returns a valid one: chi's ClientIPFrom* middlewares, for instance, with
//
//	keyfunc.IP(keyfunc.ClientAddrFrom(chimiddleware.GetClientIPAddr))
//
// (chimiddleware being github.com/go-chi/chi/v5/middleware). Only the
// server sets context values, so the address is as trustworthy as that
// middleware's configuration, and trusted proxies need not be configured
// twice: [TrustProxies] is then not consulted. A nil get makes the option
// invalid.
func ClientAddrFrom(get func(ctx context.Context) netip.Addr) IPOption {
	return func(c *ipConfig) {
		if get == nil {
			c.fail(fmt.Errorf("%w: ClientAddrFrom: nil function", algorithms.ErrInvalidOption))
			return
		}
		c.chosen = get
	}
}

// chosenAddr returns the address ClientAddrFrom's function chose for r,
// or the zero Addr.
func (c *ipConfig) chosenAddr(r *http.Request) netip.Addr {
	if c.chosen == nil {
		return netip.Addr{}
	}
	return c.chosen(r.Context())
}

// IP returns a KeyFunc that keys a request by its client's address:
// "ip:192.0.2.1" for IPv4, "ip:2001:db8:1:2::/64" for IPv6 (see
// [IPv6Prefix]). IPv4-mapped IPv6 addresses are folded to IPv4 and zones
// are dropped, so one client has one key whatever notation reaches us.
//
// Where the address comes from, in order:
//
//  1. With [ClientAddrFrom], the address a middleware earlier in the
//     chain chose (one of chi's ClientIPFrom* middlewares, for instance),
//     when it chose one. [TrustProxies] is then not consulted.
//  2. RemoteAddr, the TCP peer, which nobody can forge.
//  3. When RemoteAddr is in a [TrustProxies] prefix, the forwarding
//     headers, walked from the right: X-Forwarded-For, or RFC 7239
//     Forwarded when X-Forwarded-For is absent (see [ForwardedHeaderOnly]).
//     Trusted addresses are skipped and the first untrusted one is the
//     client; if all are trusted, the leftmost, an internal caller, is.
//     An entry that does not parse, an "unknown" or obfuscated
//     Forwarded node, or running past 8 KiB or 32 entries ends the walk,
//     and the last trusted address reached is used instead: a walk that
//     fails lands on a proxy, never on an address the client wrote.
//
// A RemoteAddr that does not parse is an error wrapping [ErrNoClientIP].
// If an option is invalid, the KeyFunc fails on every request with an
// error wrapping [algorithms.ErrInvalidOption]; use [NewIP] to learn that at start-up.
func IP(opts ...IPOption) KeyFunc {
	kf, err := NewIP(opts...)
	if err != nil {
		return failing(err)
	}
	return kf
}

// NewIP is [IP] with its options checked up front: it returns an error
// wrapping [algorithms.ErrInvalidOption] instead of a KeyFunc that always fails.
func NewIP(opts ...IPOption) (KeyFunc, error) {
	c := &ipConfig{v6Bits: DefaultIPv6Prefix}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	return c.key, nil
}

// key is the KeyFunc of IP. An IPv4 RemoteAddr already in canonical form,
// the commonest case, is its own key text: it is neither parsed into an
// address (but for the trust check) nor formatted back.
func (c *ipConfig) key(r *http.Request) (string, error) {
	if !c.chosenAddr(r).IsValid() {
		if host, a, ok := canonicalIPv4(r.RemoteAddr); ok && !c.isTrusted(a) {
			return textKey(host), nil
		}
	}
	a, err := c.clientAddr(r)
	if err != nil {
		return "", err
	}
	return ipKey(a, c.v6Bits), nil
}

// textKey is ipKey for an IPv4 address given as its canonical text.
func textKey(host string) string {
	var buf [64]byte
	b := append(buf[:0], "ip:"...)
	return intern.String(append(b, host...))
}

// ipKey builds the key in a stack buffer and takes the string from the
// process's table of recent keys: no allocation for a client seen lately,
// one for a new one.
func ipKey(a netip.Addr, v6Bits int) string {
	var buf [64]byte // "ip:" + the longest IPv6 text + "/128" fits
	b := append(buf[:0], "ip:"...)
	if a.Is6() && v6Bits < 128 {
		p, _ := a.Prefix(v6Bits) // cannot fail: v6Bits was checked
		b = p.AppendTo(b)
	} else {
		b = a.AppendTo(b)
	}
	return intern.String(b)
}

// normalize folds IPv4-mapped IPv6 to IPv4 and drops the zone, so that
// neither notation can alias an address past the trust check or split one
// client over several keys.
func normalize(a netip.Addr) netip.Addr {
	return a.Unmap().WithZone("")
}

func (c *ipConfig) clientAddr(r *http.Request) (netip.Addr, error) {
	if a := c.chosenAddr(r); a.IsValid() {
		return normalize(a), nil
	}
	peer, ok := parseRemoteAddr(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, ErrNoClientIP
	}
	if !c.isTrusted(peer) {
		return peer, nil
	}
	if !c.forwardedOnly {
		if lines := r.Header["X-Forwarded-For"]; len(lines) > 0 {
			return c.walk(lines, peer, false), nil
		}
	}
	if lines := r.Header["Forwarded"]; len(lines) > 0 {
		return c.walk(lines, peer, true), nil
	}
	return peer, nil
}

func (c *ipConfig) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// walk goes through the forwarding header from the right, starting from
// the trusted peer, and returns the first untrusted address, or the last
// trusted one when the walk ends early or runs out of entries.
func (c *ipConfig) walk(lines []string, peer netip.Addr, forwarded bool) netip.Addr {
	last := peer
	s := listScanner{lines: lines, budget: maxForwardedBytes, quoted: forwarded}
	for hop := 0; hop < maxHops; hop++ {
		elem, ok := s.next()
		if !ok {
			return last
		}
		var a netip.Addr
		if forwarded {
			a, ok = parseForwardedElement(elem)
		} else {
			a, ok = parseXFFEntry(elem)
		}
		if !ok {
			return last
		}
		if !c.isTrusted(a) {
			return a
		}
		last = a
	}
	return last
}
