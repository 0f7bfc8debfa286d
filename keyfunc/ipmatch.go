package keyfunc

import (
	"fmt"
	"net/http"
	"net/netip"

	"github.com/redlimit/redlimit/algorithms"
)

// ClientIPIn returns a predicate that reports whether a request's client
// address lies in one of prefixes, for allow-lists such as
// middleware.WithSkip. The client address is found exactly as [IP] finds
// it, with the same options: RemoteAddr, or behind a [TrustProxies] prefix
// the forwarding headers walked from the right, or with [ClientAddrFrom]
// the address a middleware earlier in the chain chose. So a client that writes its own
// X-Forwarded-For is matched by its real address unless its peer is a
// trusted proxy: an allow-list is only as safe as the proxies it trusts.
// [IPv6Prefix] does not apply: the whole address is matched.
//
// A request whose address cannot be read is not in the list. An empty list,
// an invalid prefix, a prefix of length 0 (which would hold every client)
// or an invalid option is an error wrapping [algorithms.ErrInvalidOption].
// IPv4-mapped IPv6 prefixes are folded to IPv4, as addresses are.
func ClientIPIn(prefixes []netip.Prefix, opts ...IPOption) (func(*http.Request) bool, error) {
	if len(prefixes) == 0 {
		return nil, fmt.Errorf("%w: ClientIPIn: no prefixes", algorithms.ErrInvalidOption)
	}
	list := make([]netip.Prefix, 0, len(prefixes))
	for _, p := range prefixes {
		if !p.IsValid() {
			return nil, fmt.Errorf("%w: ClientIPIn: invalid prefix %q", algorithms.ErrInvalidOption, p.String())
		}
		a, bits := p.Addr().WithZone(""), p.Bits()
		if a.Is4In6() && bits >= 96 {
			a, bits = a.Unmap(), bits-96
		}
		if bits == 0 {
			return nil, fmt.Errorf("%w: ClientIPIn: prefix %s holds every address", algorithms.ErrInvalidOption, p)
		}
		list = append(list, netip.PrefixFrom(a, bits).Masked())
	}
	c := &ipConfig{v6Bits: DefaultIPv6Prefix}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	return func(r *http.Request) bool {
		a, err := c.clientAddr(r)
		if err != nil {
			return false
		}
		for _, p := range list {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}, nil
}
