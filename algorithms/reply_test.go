package algorithms

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
