package redisstore

import (
	"slices"
	"testing"
)

// refill puts units back into the lease they were taken from, by id, and
// into no other: not into a lease that replaced it or one that ended,
// nor into a key the table forgot; a lease replaced since has them given
// back to Redis.
func TestLeaseTableRefill(t *testing.T) {
	const ttl, most = int64(1000), 8
	lease := func(id string, left int, end int64) heldLease { return heldLease{id: id, left: left, end: end} }
	units := func(tb *leaseTable) (cur, next int) {
		e := tb.shard("k").entries["k"]
		return e.cur.left, e.next.left
	}
	for _, tc := range []struct {
		name      string
		between   func(tb *leaseTable) // after the spend, before the refill
		cur, next int                  // the units after the refill
		returns   []leaseReturn        // queued to be given back after the refill
	}{
		{"same leases", func(*leaseTable) {}, 3, 2, nil},
		// L1 spent out: the grant replaces it, and its units go back to
		// Redis.
		{"a grant meanwhile", func(tb *leaseTable) { tb.granted("k", lease("L3", 5, 100), 0, 0, 0, 10) }, 5, 2,
			[]leaseReturn{{"k", "L1", 3}}},
		// Another request promotes L2 and spends its last unit.
		{"a promotion meanwhile", func(tb *leaseTable) { tb.spend("k", 1, 11, ttl, most) }, 1, 0,
			[]leaseReturn{{"k", "L1", 3}}},
		// L2 ended, its unit given back by the sweep: what comes back is
		// given back too (Redis takes L2's once).
		{"a lease over meanwhile", func(tb *leaseTable) { tb.sweep(nil, 200, ttl, false) }, 0, 0,
			[]leaseReturn{{"k", "L1", 3}, {"k", "L2", 1}}},
		// A return queued for the replaced lease takes the units back too.
		{"a return queued meanwhile", func(tb *leaseTable) {
			s := tb.shard("k")
			s.returns = append(s.returns, leaseReturn{"k", "L1", 2})
			tb.granted("k", lease("L3", 5, 100), 0, 0, 0, 10)
		}, 5, 2, []leaseReturn{{"k", "L1", 5}}},
		{"the key forgotten", func(tb *leaseTable) { tb.drop("k") }, -1, -1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := newLeaseTable(4, leaseBusy)
			tb.spend("k", 1, 0, ttl, most) // creates the key's entry
			tb.granted("k", lease("L1", 3, 50), 0, 0, 0, 0)
			tb.granted("k", lease("L2", 2, 100), 0, 0, 0, 0)
			sp := tb.spend("k", 4, 10, ttl, most) // 3 from L1, 1 from L2
			if sp.outcome != leaseSpent || sp.took != [2]leaseTook{{"L1", 3}, {"L2", 1}} {
				t.Fatalf("spend: %+v", sp)
			}
			tc.between(tb)
			tb.refill("k", sp.took)
			if tc.cur < 0 {
				if e := tb.shard("k").entries["k"]; e != nil {
					t.Fatalf("a dropped key came back: %+v", e)
				}
				return
			}
			if cur, next := units(tb); cur != tc.cur || next != tc.next {
				t.Errorf("after the refill: %d and %d units, want %d and %d", cur, next, tc.cur, tc.next)
			}
			if got := tb.shard("k").returns; !slices.Equal(got, tc.returns) {
				t.Errorf("returns queued: %v, want %v", got, tc.returns)
			}
		})
	}
}
