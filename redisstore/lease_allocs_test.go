package redisstore

import (
	"context"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
)

// allowAllocs returns the allocations of an Allow of key on l that its
// leases admit, after setting key's lease in each of tables (l's) far
// from its prefetch, so that no renewal (whose pipeline allocates) runs
// meanwhile. key must hold a lease in each table.
func allowAllocs(t *testing.T, l algorithms.Limiter, key string, tables ...*leaseTable) float64 {
	t.Helper()
	for _, tb := range tables {
		s := tb.shard(key)
		s.mu.Lock()
		e := s.entries[key]
		e.cur.left, e.granted = 100_000, 100_000
		s.mu.Unlock()
	}
	return testing.AllocsPerRun(100, func() {
		if res, err := l.Allow(context.Background(), key, 1); err != nil || !res.Allowed {
			t.Fatalf("%+v %v", res, err)
		}
	})
}
