package operator

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxIdentityLength is the longest identity, in bytes, the handler
// accepts: far above what keyfunc's key functions return (they hash what
// is long), and short enough that the route-scoped key stays within
// algorithms.MaxKeyLength.
const maxIdentityLength = 512

// apiKeyHashLen is the length of keyfunc.HashAPIKey's result.
const apiKeyHashLen = 32

// identityOf returns the one identity of a query, or why it is not
// acceptable. The reasons never quote the identity: a raw API key sent by
// mistake is not sent back.
func identityOf(values []string) (string, string) {
	switch {
	case len(values) == 0 || values[0] == "":
		return "", "The identity parameter is required: what the policy's key function returns, such as ip:192.0.2.1."
	case len(values) > 1:
		return "", "Give one identity."
	}
	id := values[0]
	switch {
	case len(id) > maxIdentityLength:
		return "", "The identity is longer than " + strconv.Itoa(maxIdentityLength) + " bytes."
	case !printable(id):
		return "", "The identity must be printable text."
	case strings.HasPrefix(id, "key:") && !isHash(id[len("key:"):]):
		return "", `An API key's identity is "key:" and the key's keyfunc.HashAPIKey, never the raw key.`
	}
	return id, ""
}

// printable reports whether s is valid UTF-8 of printable characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, c := range s {
		if !unicode.IsPrint(c) {
			return false
		}
	}
	return true
}

// isHash reports whether s looks like keyfunc.HashAPIKey's result.
func isHash(s string) bool {
	if len(s) != apiKeyHashLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
