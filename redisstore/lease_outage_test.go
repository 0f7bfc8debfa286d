package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// Leases and an outage: three stores under WithLeases spend 4 keys'
// limit L through grants and leases, to the last unit and no further (no
// denial to remember), Redis freezes, and every store asks again for each
// key, then Redis thaws and every store asks again.
// The twin starts from what the grants said was left, and a key that
// owes after the fault goes through the gate rather than take a lease, so
// no key is admitted more than L + n over the period, as without leases.
func TestLeasesOutageBound(t *testing.T) {
	const keys, limit, n = 4, 24, 3
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			srv := redistest.StartServer(t)
			lim := algorithms.Limit{Rate: limit, Period: time.Hour, Burst: limit}
			_, ls := leasedStores(t, srv.Addr, n, alg, lim, 30*time.Second, WithTimeout(50*time.Millisecond))
			admitted := make([]int, keys)
			ask := func(i int, l *leasedLimiter) {
				res, err := l.Allow(context.Background(), fmt.Sprint("k", i), 1)
				if err != nil {
					t.Fatal(err)
				}
				if res.Allowed {
					admitted[i]++
				}
			}
			for i := range keys {
				for r := range limit {
					ask(i, ls[r%n])
				}
				if admitted[i] != limit {
					t.Fatalf("key %d: %d admitted of its first %d requests, want all", i, admitted[i], limit)
				}
			}
			srv.Freeze()
			// More than a twin's share (L / n) from every store.
			for i := range keys {
				for range limit/n + 2 {
					for _, l := range ls {
						ask(i, l)
					}
				}
			}
			srv.Thaw()
			for i := range keys {
				for range limit {
					for _, l := range ls {
						ask(i, l)
					}
				}
			}
			over, most := 0, 0
			for _, a := range admitted {
				most = max(most, a)
				if a > limit+n {
					over++
				}
			}
			t.Logf("at most %d admitted a key (bound L + n = %d)", most, limit+n)
			if over > 0 {
				t.Errorf("%d of %d keys admitted more than L + n = %d (up to %d)", over, keys, limit+n, most)
			}
		})
	}
}
