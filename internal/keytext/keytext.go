// Package keytext builds the text of rate-limit keys for keyfunc and its
// integrations (keyfunc/jwtkey): a namespace, then a part kept verbatim
// when it is short and every byte of it is safe, or else the part's hash,
// so that a key never carries a raw secret or a separator, and two parts
// never share a key by accident.
package keytext

import (
	"crypto/sha256"
	"encoding/hex"
)

// HashBytes is how much of a SHA-256 digest a key keeps: 128 bits make
// accidental collisions negligible while keeping keys short.
const HashBytes = 16

// HashMark follows the namespace of a hashed part. No safe set of keyfunc's
// admits it, so a hashed part can never equal a part kept verbatim.
const HashMark = '#'

// AppendHash appends the truncated hex SHA-256 of s: 2 × HashBytes
// characters.
func AppendHash(b []byte, s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return hex.AppendEncode(b, sum[:HashBytes])
}

// Namespaced returns ns+s when s is at most max bytes long and every byte
// is safe, and ns+"#"+hash(s) otherwise. It builds the key with one
// allocation.
func Namespaced(ns, s string, max int, safe func(byte) bool) string {
	if len(s) <= max && AllSafe(s, safe) {
		return ns + s
	}
	var buf [64]byte
	b := append(buf[:0], ns...)
	b = append(b, HashMark)
	b = AppendHash(b, s)
	return string(b)
}

// AllSafe reports whether every byte of s is safe.
func AllSafe(s string, safe func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !safe(s[i]) {
			return false
		}
	}
	return true
}
