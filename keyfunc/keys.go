package keyfunc

import "github.com/redlimit/redlimit/internal/keytext"

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// isPatternByte admits printable ASCII and the space of ServeMux patterns
// ("GET /items/{id}"), except the Join separator, its escape character and
// the hash mark.
func isPatternByte(c byte) bool {
	return ' ' <= c && c <= '~' && c != '|' && c != '%' && c != keytext.HashMark
}

func isMethodByte(c byte) bool {
	return isAlnum(c) || c == '-' || c == '_' || c == '.'
}
