package memstore

import (
	"hash/maphash"
	"math"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// BenchmarkMemoryHousekeep is one request's housekeeping on a shard of
// 250,000 expired entries.
func BenchmarkMemoryHousekeep(b *testing.B) {
	seed := maphash.MakeSeed()
	p := ratemath.ParamsFor(algorithms.FixedWindow, algorithms.PerMinute(10))
	var sh memoryShard
	fill := func() {
		t0 := start.UnixMicro()
		for i := range 250_000 {
			key := ipKey(i)
			_, e := ratemath.Entry{}.Check(algorithms.FixedWindow, t0, p, 1)
			e.Commit(algorithms.FixedWindow, t0, p, 1)
			sh.insert(seed, 0, algorithms.FixedWindow, p, key, tagOf(maphash.String(seed, key)), &e, t0, math.MaxInt)
		}
	}
	now := start.UnixMicro() + 61e6
	for b.Loop() {
		if sh.count == 0 {
			b.StopTimer()
			fill()
			sh.nextSweep = 0
			b.StartTimer()
		}
		sh.housekeep(now, 60e6)
	}
}
