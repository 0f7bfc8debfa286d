package main

import (
	"image/color"
	"testing"

	"gonum.org/v1/plot/vg/draw"
)

// TestLineStyles checks that a row that is neither a peer's nor
// redlimit's, the comparison's floor, is drawn in the reference style and
// leaves redlimit's rows the colours they have without it; and that
// redlimit's leased rows, and only they, have square points.
func TestLineStyles(t *testing.T) {
	cases := []struct {
		name   string
		peer   bool
		color  color.Color
		square bool
	}{
		{"floor: one GET", false, referenceColor, false},
		{"go-redis/redis_rate v10", true, peerStyles[0].color, false},
		{"redlimit, redis, fixed_window", false, colors[0], false},
		{"redlimit, redis, sliding_window_log", false, colors[1], false},
		{"redlimit, redis, fixed_window, leased 1s", false, colors[2], true},
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
		if _, square := points.Shape.(draw.BoxGlyph); square != tc.square {
			t.Errorf("%s: points %T, want square %v", tc.name, points.Shape, tc.square)
		}
	}
}
