package main

import (
	"image/color"
	"testing"
)

// TestLineStyles checks that a row that is neither a peer's nor
// redlimit's, the comparison's floor, is drawn in the reference style and
// leaves redlimit's rows the colours they have without it.
func TestLineStyles(t *testing.T) {
	cases := []struct {
		name  string
		peer  bool
		color color.Color
	}{
		{"floor: one GET", false, referenceColor},
		{"go-redis/redis_rate v10", true, peerStyles[0].color},
		{"redlimit, redis, fixed_window", false, colors[0]},
		{"redlimit, redis, sliding_window_log", false, colors[1]},
	}
	var st lineStyler
	for _, tc := range cases {
		line, points, err := seriesOf([]benchRow{{g: 2, reqPerSec: 1000}, {g: 50, reqPerSec: 2000}})
		if err != nil {
			t.Fatal(err)
		}
		st.style(line, points, tc.name, tc.peer)
		if line.Color != tc.color || points.Color != tc.color {
			t.Errorf("%s: line %v, points %v, want %v", tc.name, line.Color, points.Color, tc.color)
		}
	}
}
