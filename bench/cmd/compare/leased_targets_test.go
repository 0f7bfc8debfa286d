package main

import (
	"math"
	"reflect"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/bench/internal/subjects"
)

var (
	leasedFW = leasedName(algorithms.FixedWindow)
	leasedTB = leasedName(algorithms.TokenBucket)
)

// rps is a record with a req/s figure only.
func rps(name string, g int, v float64) record {
	return rec(name, g, 1e9/v, v, math.NaN(), 8)
}

// spoilt is r with its counts over the rounds.
func spoilt(r record, unexpected, standIns, served int64) record {
	r.Unexpected, r.StandIns, r.Served = unexpected, standIns, served
	return r
}

func TestTenantTargets(t *testing.T) {
	peers := []record{rps(subjects.RedisRateName, 2, 10_000), rps(subjects.RedisRateName, 50, 20_000)}
	fw := []record{
		rps(memoryFW, 2, 600_000), rps(memoryFW, 50, 450_000),
		rps(redisFW, 2, 20_000), rps(redisFW, 50, 40_000),
	}
	cases := []struct {
		name string
		recs []record
		want [][]string
	}{
		{
			// 300,000 ÷ 20,000 = 15; 450,000 ÷ 300,000 = 1.5 (at the
			// bound); 600,000 ÷ 300,001 shows as 2.00 (at the bound).
			name: "all met, at the bounds",
			recs: append(append(peers, fw...), rps(leasedFW, 2, 300_001), rps(leasedFW, 50, 300_000)),
			want: [][]string{{leasedFW, "15.00× ✓", "1.50× ✓", "2.00× ✓", "7.50×", "3 of 3"}},
		},
		{
			name: "all missed",
			recs: append(append(peers, fw...), rps(leasedFW, 2, 290_000), rps(leasedFW, 50, 199_000)),
			want: [][]string{{leasedFW, "9.95× ✗", "2.26× ✗", "2.07× ✗", "4.97×", "0 of 3"}},
		},
		{
			// A leased row is set against its own algorithm's rows: the
			// token bucket has no memory or exact row here.
			name: "each against its algorithm",
			recs: append(append(peers, fw...), rps(leasedFW, 2, 400_000), rps(leasedFW, 50, 400_000),
				rps(leasedTB, 2, 400_000), rps(leasedTB, 50, 400_000)),
			want: [][]string{
				{leasedFW, "20.00× ✓", "1.12× ✓", "1.50× ✓", "10.00×", "3 of 3"},
				{leasedTB, "20.00× ✓", "–", "–", "–", "1 of 1"},
			},
		},
		{
			// Stand-ins decided 2% of the leased row's requests at g=50,
			// and the memory row refused one at g=2: those targets are
			// missed whatever their ratios; 1% of stand-ins is not.
			name: "refusals and stand-ins",
			recs: append(append(peers, rps(memoryFW, 50, 450_000), spoilt(rps(memoryFW, 2, 600_000), 1, 0, 1000), rps(redisFW, 50, 40_000)),
				spoilt(rps(leasedFW, 2, 400_000), 0, 10, 1000), spoilt(rps(leasedFW, 50, 400_000), 0, 20, 1000)),
			want: [][]string{{leasedFW,
				"20.00× ✗ (" + leasedFW + ": 2% stand-ins)",
				"1.12× ✗ (" + leasedFW + ": 2% stand-ins)",
				"1.50× ✗ (" + memoryFW + ": 1 unexpected statuses)",
				"10.00×", "0 of 3"}},
		},
		{
			name: "no redis_rate",
			recs: append(fw, rps(leasedFW, 2, 400_000), rps(leasedFW, 50, 400_000)),
			want: [][]string{{leasedFW, "–", "1.12× ✓", "1.50× ✓", "10.00×", "2 of 2"}},
		},
		{
			name: "no leased row",
			recs: append(peers, fw...),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tenantTargets(figuresOf(tc.recs), 2, 50).rows; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rows\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestClientLeasedTargets(t *testing.T) {
	exact := []record{rps(redisFW, 2, 20_000), rps(redisFW, 50, 80_000), rps(redisFW, 256, 90_000)}
	cases := []struct {
		name string
		recs []record
		want [][]string
	}{
		{
			// 79,700 ÷ 80,000 shows as 1.00: met, as shown.
			name: "met at every g",
			recs: append(exact, rps(leasedFW, 2, 30_000), rps(leasedFW, 50, 79_700), rps(leasedFW, 256, 90_000)),
			want: [][]string{{leasedFW, "1.50× ✓", "1.00× ✓", "1.00× ✓", "3 of 3"}},
		},
		{
			name: "slower at one g",
			recs: append(exact, rps(leasedFW, 2, 30_000), rps(leasedFW, 50, 79_000), rps(leasedFW, 256, 95_000)),
			want: [][]string{{leasedFW, "1.50× ✓", "0.99× ✗", "1.06× ✓", "2 of 3"}},
		},
		{
			// At g=256 the leased row refused 7 requests and stand-ins
			// decided most of the rest: faster, but not by deciding.
			name: "faster by stand-ins",
			recs: append(exact, rps(leasedFW, 2, 30_000), rps(leasedFW, 50, 80_000), spoilt(rps(leasedFW, 256, 180_000), 7, 600, 1000)),
			want: [][]string{{leasedFW, "1.50× ✓", "1.00× ✓", "2.00× ✗ (" + leasedFW + ": 7 unexpected statuses; " + leasedFW + ": 60% stand-ins)", "2 of 3"}},
		},
		{
			name: "no exact row",
			recs: []record{rps(leasedFW, 2, 30_000), rps(leasedFW, 50, 79_000), rps(leasedFW, 256, 95_000)},
			want: [][]string{{leasedFW, "–", "–", "–", "0 of 0"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := clientLeasedTargets(figuresOf(tc.recs), []int{2, 50, 256}).rows; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rows\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
