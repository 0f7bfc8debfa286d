// Parsing of the addresses in RemoteAddr, X-Forwarded-For and Forwarded,
// bounded whatever a client sends.

package keyfunc

import (
	"net"
	"net/netip"
	"strings"

	"github.com/redlimit/redlimit/internal/keytext"
)

// parseRemoteAddr accepts "host:port" and, as tests and some servers set
// it, a bare address.
func parseRemoteAddr(s string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		host = s
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return normalize(a), true
}

// canonicalIPv4 recognizes the usual RemoteAddr, "a.b.c.d:port" or a bare
// "a.b.c.d", whose address is written as netip writes it: decimal octets
// of at most 255, without leading zeros. It returns the address and its
// text, which is then the canonical text, so the key needs no formatting.
// Anything else is left to parseRemoteAddr, which reads these inputs
// alike (TestCanonicalIPv4).
func canonicalIPv4(s string) (host string, a netip.Addr, ok bool) {
	var b [4]byte
	i := 0
	for field := range 4 {
		if field > 0 {
			if i == len(s) || s[i] != '.' {
				return "", netip.Addr{}, false
			}
			i++
		}
		start, v := i, 0
		for i < len(s) && i-start < 3 && '0' <= s[i] && s[i] <= '9' {
			v = v*10 + int(s[i]-'0')
			i++
		}
		if n := i - start; n == 0 || v > 255 || n > 1 && s[start] == '0' {
			return "", netip.Addr{}, false
		}
		b[field] = byte(v)
	}
	host = s[:i]
	if i < len(s) {
		// Only a numeric port: any other rest is parseRemoteAddr's to judge.
		if s[i] != ':' {
			return "", netip.Addr{}, false
		}
		for _, c := range s[i+1:] {
			if c < '0' || c > '9' {
				return "", netip.Addr{}, false
			}
		}
	}
	return host, netip.AddrFrom4(b), true
}

// parseXFFEntry accepts an address, optionally with a port, and IPv6 in
// brackets with or without a port: the forms proxies are seen to write.
func parseXFFEntry(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return normalize(a), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalize(ap.Addr()), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() {
			return normalize(a), true
		}
	}
	return netip.Addr{}, false
}

// parseForwardedElement returns the address in the element's for=
// parameter. An element without exactly one for=, or whose node is
// "unknown", obfuscated or malformed, reports false: each ends the walk.
func parseForwardedElement(elem string) (netip.Addr, bool) {
	var node string
	found := false
	for elem != "" {
		var pair string
		pair, elem = cutUnquoted(elem, ';')
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		name, value, ok := strings.Cut(pair, "=")
		if !ok {
			return netip.Addr{}, false
		}
		if !strings.EqualFold(strings.TrimSpace(name), "for") {
			continue
		}
		if found {
			return netip.Addr{}, false // RFC 7239 allows one for= per element
		}
		node, found = strings.TrimSpace(value), true
	}
	if !found {
		return netip.Addr{}, false
	}
	if len(node) >= 2 && node[0] == '"' && node[len(node)-1] == '"' {
		node = node[1 : len(node)-1]
	}
	return parseForwardedNode(node)
}

// parseForwardedNode parses an RFC 7239 node: IPv4 or bracketed IPv6 with
// an optional port. "unknown" and obfuscated names ("_hidden") identify no
// address and report false. Bare IPv6 is accepted although the RFC wants
// brackets, since position, not syntax, is what makes an entry trusted.
func parseForwardedNode(node string) (netip.Addr, bool) {
	host, port := node, ""
	if strings.HasPrefix(node, "[") {
		end := strings.IndexByte(node, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		host, port = node[1:end], node[end+1:]
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || !validNodePort(port) {
			return netip.Addr{}, false
		}
		return normalize(a), true
	}
	if a, err := netip.ParseAddr(node); err == nil {
		return normalize(a), true
	}
	if i := strings.IndexByte(node, ':'); i >= 0 {
		host, port = node[:i], node[i:]
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Is4() || !validNodePort(port) {
		return netip.Addr{}, false
	}
	return a, true
}

// validNodePort accepts "", ":" followed by up to five digits, or ":"
// followed by an obfuscated port ("_" and token characters).
func validNodePort(p string) bool {
	if p == "" {
		return true
	}
	if p[0] != ':' || len(p) < 2 {
		return false
	}
	p = p[1:]
	if p[0] == '_' {
		return keytext.AllSafe(p[1:], isMethodByte) && len(p) > 1
	}
	if len(p) > 5 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
	}
	return true
}

// cutUnquoted splits s at the first sep outside a quoted string.
func cutUnquoted(s string, sep byte) (before, after string) {
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && inQuote:
			i++
		case c == '"':
			inQuote = !inQuote
		case c == sep && !inQuote:
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// listScanner yields the comma-separated entries of a header, repeated
// lines joined in order, from the right, without copying. It examines at
// most budget bytes in all, so a megabyte of header costs no more than a
// short one. With quoted set, commas inside quoted strings do not split.
type listScanner struct {
	lines  []string // lines not yet started
	line   string   // the unscanned left part of the current line
	budget int
	quoted bool
}

// next returns the next non-empty entry to the left, trimmed of optional
// white space. It reports false when the entries are used up or the
// budget is spent before an entry is complete.
func (s *listScanner) next() (string, bool) {
	for {
		for s.line == "" {
			// Each line costs a byte, so many empty lines are bounded too.
			if len(s.lines) == 0 || s.budget == 0 {
				return "", false
			}
			s.budget--
			s.line, s.lines = s.lines[len(s.lines)-1], s.lines[:len(s.lines)-1]
		}
		inQuote := false
		i := len(s.line) - 1
		for ; i >= 0; i-- {
			if s.budget == 0 {
				return "", false
			}
			s.budget--
			c := s.line[i]
			if c == '"' && s.quoted && !s.escaped(i) {
				inQuote = !inQuote
			} else if c == ',' && !inQuote {
				break
			}
		}
		var entry string
		if i < 0 {
			entry, s.line = s.line, ""
		} else {
			entry, s.line = s.line[i+1:], s.line[:i]
		}
		if entry = strings.Trim(entry, " \t"); entry != "" {
			return entry, true
		}
	}
}

// escaped reports whether the quote at line[i] follows an odd run of
// backslashes. Looking back spends budget too; a run longer than the
// budget counts as not escaped, and the scan then stops on the budget.
func (s *listScanner) escaped(i int) bool {
	n := 0
	for j := i - 1; j >= 0 && s.line[j] == '\\' && n < s.budget; j-- {
		n++
	}
	return n%2 == 1
}
