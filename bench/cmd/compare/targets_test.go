package main

import (
	"math"
	"reflect"
	"testing"

	"github.com/redlimit/redlimit/bench/internal/subjects"
)

const (
	redisFW  = "redlimit, redis, fixed_window"
	memoryFW = "redlimit, memory, fixed_window"
)

// rec is a compare-section record with the figures the targets read.
func rec(name string, g int, ns, rps, redisCPU, allocs float64) record {
	return record{Section: "compare", Middleware: name, G: g, NsPerOp: ns, ReqPerSec: rps, RedisMicros: redisCPU, AllocsPerOp: allocs}
}

// redisPeers are the floor and the Redis peers at g=2 and g=50.
func redisPeers(ulule bool) []record {
	rs := []record{
		rec(subjects.FloorName, 2, 500, 0, 3, 10),
		rec(subjects.RedisRateName, 2, 1200, 0, 12, 30),
		rec(subjects.RedisRateName, 50, 50, 20_000, 7, 30),
	}
	if ulule {
		rs = append(rs, rec(subjects.UluleRedisName, 2, 1000, 0, 14, 35))
	}
	return rs
}

// memoryPeers are the bare handler and go-chi/httprate at g=2 and g=50.
func memoryPeers() []record {
	return []record{
		rec(subjects.Bare.Name, 2, 100, 0, math.NaN(), 4),
		rec(subjects.Bare.Name, 50, 100, 0, math.NaN(), 4),
		rec(subjects.HTTPRateMemoryName, 2, 700, 0, math.NaN(), 12),
		rec(subjects.HTTPRateMemoryName, 50, 1100, 0, math.NaN(), 12),
	}
}

func TestTargets(t *testing.T) {
	cases := []struct {
		name       string
		recs       []record
		redis, mem [][]string
	}{
		{
			name: "all met",
			recs: append(redisPeers(true),
				rec(redisFW, 2, 900, 0, 10, 25), rec(redisFW, 50, 20, 50_000, 5.96, 15)),
			redis: [][]string{{redisFW, "1.80×", "0.90× ✓", "0.75×", "0.83× ✓", "2.50× ✓", "6.0 ✓", "4 of 4"}},
		},
		{
			// 1.004 shows as 1.00, which meets ≤ 1.00; 6.06 shows as 6.1.
			name: "judged as shown",
			recs: append(redisPeers(true),
				rec(redisFW, 2, 1004, 0, 13, 25), rec(redisFW, 50, 26, 39_000, 6.06, 15)),
			redis: [][]string{{redisFW, "2.01×", "1.00× ✓", "0.84×", "1.08× ✗", "1.95× ✗", "6.1 ✗", "1 of 4"}},
		},
		{
			name: "a peer left out",
			recs: append(redisPeers(false),
				rec(redisFW, 2, 900, 0, 10, 25), rec(redisFW, 50, 20, 50_000, 5, 15)),
			redis: [][]string{{redisFW, "1.80×", "–", "0.75×", "0.83× ✓", "2.50× ✓", "5.0 ✓", "3 of 3"}},
		},
		{
			// Overheads 500 and 400 ns against httprate's 1000 and 600.
			name: "memory",
			recs: append(memoryPeers(),
				rec(memoryFW, 2, 500, 0, math.NaN(), 9), rec(memoryFW, 50, 600, 0, math.NaN(), 9)),
			mem: [][]string{{memoryFW, "0.50× ✓", "0.67× ✗", "9 ✗", "1 of 3"}},
		},
		{
			name: "no bare handler",
			recs: append(memoryPeers()[2:],
				rec(memoryFW, 2, 500, 0, math.NaN(), 8), rec(memoryFW, 50, 600, 0, math.NaN(), 8)),
			mem: [][]string{{memoryFW, "–", "–", "8 ✓", "1 of 1"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := figuresOf(tc.recs)
			if got := redisTargets(f, 2, 50).rows; !reflect.DeepEqual(got, tc.redis) {
				t.Errorf("Redis rows\n got %q\nwant %q", got, tc.redis)
			}
			if got := memoryTargets(f, 2, 50).rows; !reflect.DeepEqual(got, tc.mem) {
				t.Errorf("memory rows\n got %q\nwant %q", got, tc.mem)
			}
		})
	}
}
