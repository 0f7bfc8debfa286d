package keytext

import (
	"strings"
	"testing"
)

func isLower(c byte) bool { return 'a' <= c && c <= 'z' }

func TestNamespaced(t *testing.T) {
	hashed := "ns:#" + string(AppendHash(nil, "a|b"))
	for _, tc := range []struct {
		name, s string
		max     int
		want    string
	}{
		{"kept", "abc", 8, "ns:abc"},
		{"too long", "abcdefghi", 8, "ns:#" + string(AppendHash(nil, "abcdefghi"))},
		{"unsafe byte", "a|b", 8, hashed},
		{"empty", "", 8, "ns:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Namespaced("ns:", tc.s, tc.max, isLower); got != tc.want {
				t.Errorf("Namespaced(%q) = %q, want %q", tc.s, got, tc.want)
			}
		})
	}
	if h := AppendHash(nil, "x"); len(h) != 2*HashBytes || strings.Trim(string(h), "0123456789abcdef") != "" {
		t.Errorf("AppendHash = %q, want %d hex digits", h, 2*HashBytes)
	}
	if AllSafe(string(HashMark), isLower) {
		t.Error("the hash mark is safe: a hashed part could equal a verbatim one")
	}
}
