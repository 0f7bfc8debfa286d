package redisstore

import "testing"

func TestParseReply(t *testing.T) {
	tests := []struct {
		in   string
		ok   bool
		want [5]int64
	}{
		{"1 1 99 0 60000000", true, [5]int64{1, 1, 99, 0, 60000000}},
		{"0 2 0 1500 2000", true, [5]int64{0, 2, 0, 1500, 2000}},
		{"", false, [5]int64{}},
		{"1 1 99 0", false, [5]int64{}},
		{"1 1 99 0 5 6", false, [5]int64{}},
		{"1  1 99 0 5", false, [5]int64{}},
		{"1 1 -9 0 5", false, [5]int64{}},
		{"1 1 9.5 0 5", false, [5]int64{}},
		{"1 1 99 0 5 ", false, [5]int64{}},
		{"1 1 1234567890123456789012 0 5", false, [5]int64{}},
		{"OK", false, [5]int64{}},
	}
	for _, tt := range tests {
		var f [5]int64
		ok := parseReply(tt.in, f[:])
		if ok != tt.ok || (ok && f != tt.want) {
			t.Errorf("parseReply(%q) = %v %v, want %v %v", tt.in, ok, f, tt.ok, tt.want)
		}
	}
}

func TestHashTagSafe(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ip:192.0.2.1", "ip:192.0.2.1"},
		{"route:/users/{id}|ip:192.0.2.1", "route:/users/%7Bid%7D|ip:192.0.2.1"},
		{"a%7Bb", "a%257Bb"},
		{"a{b", "a%7Bb"},
		{"}", "%7D"},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		got := hashTagSafe(tt.in)
		if got != tt.want {
			t.Errorf("hashTagSafe(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("%q and %q escape alike", tt.in, other)
		}
		seen[got] = tt.in
	}
}
