package ratemath

import (
	"slices"
	"testing"
)

// times returns the log's times, oldest first.
func times(l *TimeLog) []int64 {
	out := make([]int64, l.N)
	for i := range out {
		out[i] = l.at(int64(i))
	}
	return out
}

// TestTimeLogStore: a log loaded, changed as a decision changes it, and
// stored back field by field reads as the changed copy, with the copy's
// ring, whether or not the ring grew or wrapped.
func TestTimeLogStore(t *testing.T) {
	tests := []struct {
		name   string
		before []int64 // the stored log's times
		cutoff int64   // dropThrough
		push   []int64
		refund int   // as Refund gives back the newest times
		clamp  int64 // clampTo, 0: none
	}{
		{name: "push within the ring", before: []int64{1, 2}, push: []int64{3}},
		{name: "push grows the ring", before: []int64{1, 2, 3, 4}, push: []int64{5, 6}},
		{name: "drop and push wrap the ring", before: []int64{1, 2, 3, 4}, cutoff: 2, push: []int64{5, 6}},
		{name: "drop all", before: []int64{1, 2, 3}, cutoff: 3},
		{name: "first push", push: []int64{7}},
		{name: "refund", before: []int64{1, 2, 3}, push: []int64{4}, refund: 2},
		{name: "clamp", before: []int64{1, 5, 9}, clamp: 4},
		{name: "drop, grow past a wrapped ring", before: []int64{1, 2, 3, 4, 5, 6, 7, 8}, cutoff: 3, push: []int64{9, 10, 11, 12, 13, 14}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stored TimeLog
			for _, at := range tt.before {
				stored.push(at)
			}
			e := stored // as the store loads an entry
			e.dropThrough(tt.cutoff)
			for _, at := range tt.push {
				e.push(at)
			}
			e.N -= min(tt.refund, e.N)
			if tt.clamp != 0 {
				e.clampTo(tt.clamp)
			}
			want := times(&e)
			stored.Store(&e)
			if got := times(&stored); !slices.Equal(got, want) {
				t.Fatalf("stored log %v, want %v", got, want)
			}
			if len(stored.Buf) != len(e.Buf) || len(e.Buf) > 0 && &stored.Buf[0] != &e.Buf[0] {
				t.Fatalf("stored log keeps a ring of %d, not the copy's of %d", len(stored.Buf), len(e.Buf))
			}
		})
	}
}
