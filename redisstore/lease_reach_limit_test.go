package redisstore

import (
	"sync/atomic"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
)

// leaseReturns is the most times the reach-limit tests have the stores
// give their leases back: each return frees the units the leases held,
// so a key short of its limit after that many is held back for good.
const leaseReturns = 5

// untilLeasesReturned runs round, and while it reports something still
// pending (a key admitted, or short of its limit), has every store give
// its leases back and runs it again; it fails t when something is still
// pending after leaseReturns returns.
func untilLeasesReturned(t *testing.T, stores []*Store, round func() (pending int)) {
	t.Helper()
	for returns := 0; ; returns++ {
		pending := round()
		if pending == 0 || t.Failed() {
			return
		}
		if returns == leaseReturns {
			t.Fatalf("%d still pending after %d returns of the leases", pending, returns)
		}
		returnLeases(stores)
	}
}

// returnLeases has every store give its leases back.
func returnLeases(stores []*Store) {
	for _, s := range stores {
		s.leases.flush()
	}
}

// driveKeys drives every key until every limiter of ls refuses it (8
// keys at a time), adds what each passed to admitted, and returns the
// total.
func driveKeys[L algorithms.Limiter](t *testing.T, ls []L, keys []string, admitted []atomic.Int64) int {
	var total atomic.Int64
	forEachKeyN(8, len(keys), func(i int) {
		n := int64(driveUntilDenied(t, ls, keys[i]))
		admitted[i].Add(n)
		total.Add(n)
	})
	return int(total.Load())
}

// reachLimit gives the leases back and drives every key until refused,
// until no key gains, adding what each passed to admitted: then each key
// has been admitted all its limit allows, which the caller checks.
func reachLimit[L algorithms.Limiter](t *testing.T, stores []*Store, ls []L, keys []string, admitted []atomic.Int64) {
	t.Helper()
	returnLeases(stores)
	untilLeasesReturned(t, stores, func() int { return driveKeys(t, ls, keys, admitted) })
}

// keyNames are keyName(0) to keyName(n-1).
func keyNames(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = keyName(i)
	}
	return keys
}
