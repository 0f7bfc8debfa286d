package keyfunc

import (
	"crypto/sha256"
	"encoding/hex"
)

// hashBytes is how much of a SHA-256 digest a key keeps: 128 bits make
// accidental collisions negligible while keeping keys short.
const hashBytes = 16

// hashMark follows the namespace of a hashed part. No safe set below admits
// it, so a hashed part can never equal a part kept verbatim.
const hashMark = '#'

// appendHash appends the truncated hex SHA-256 of s.
func appendHash(b []byte, s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return hex.AppendEncode(b, sum[:hashBytes])
}

// namespaced returns ns+s when s is at most max bytes long and every byte
// is safe, and ns+"#"+hash(s) otherwise. It builds the key with one
// allocation.
func namespaced(ns, s string, max int, safe func(byte) bool) string {
	if len(s) <= max && allSafe(s, safe) {
		return ns + s
	}
	var buf [64]byte
	b := append(buf[:0], ns...)
	b = append(b, hashMark)
	b = appendHash(b, s)
	return string(b)
}

func allSafe(s string, safe func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !safe(s[i]) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// isPatternByte admits printable ASCII and the space of ServeMux patterns
// ("GET /items/{id}"), except the Join separator, its escape character and
// the hash mark.
func isPatternByte(c byte) bool {
	return ' ' <= c && c <= '~' && c != '|' && c != '%' && c != hashMark
}

func isMethodByte(c byte) bool {
	return isAlnum(c) || c == '-' || c == '_' || c == '.'
}
