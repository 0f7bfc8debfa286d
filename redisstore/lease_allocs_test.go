package redisstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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
	allocs := testing.AllocsPerRun(100, func() {
		if res, err := l.Allow(context.Background(), key, 1); err != nil || !res.Allowed {
			t.Fatalf("%+v %v", res, err)
		}
	})
	if allocs != 0 {
		// Say what the leases were and who decided, for the failure.
		res, err := l.Allow(context.Background(), key, 1)
		t.Logf("then decided by %s (%v); %s", res.Decider, err, leaseStates(key, tables))
	}
	return allocs
}

// leaseStates describes key's entry in each of tables.
func leaseStates(key string, tables []*leaseTable) string {
	var b strings.Builder
	now := time.Now().UnixNano()
	for i, tb := range tables {
		s := tb.shard(key)
		s.mu.Lock()
		if e := s.entries[key]; e != nil {
			fmt.Fprintf(&b, "table %d: cur %+v, next %+v (ends in %s, %s), seeking %v, denied %v; ", i, e.cur, e.next,
				time.Duration(e.cur.end-now), time.Duration(e.next.end-now), e.seeking, e.denied > now)
		}
		s.mu.Unlock()
	}
	return b.String()
}
