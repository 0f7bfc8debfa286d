package httpratecounter

import (
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/internal/clusterslot"
	"github.com/redlimit/redlimit/internal/redistest"
)

// While a Cluster slot migrates, a client's counters are read and counted
// exactly, whether they are still on the source, moved to the target, or
// new; only the first call finds out that the slot migrates.
func TestClusterMigratingSlotCounts(t *testing.T) {
	addrs := redistest.Cluster(t)
	const window = time.Hour
	for _, tc := range []struct {
		name   string
		before bool // count once before the migration: counters on the source
		move   bool // then move the client's counters to the target
	}{
		{name: "counters on the source", before: true},
		{name: "counters moved to the target", before: true, move: true},
		{name: "new client", before: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, tryAgains := redistest.TryAgainClient(t, addrs)
			prefix := "mig" + strings.ReplaceAll(tc.name, " ", "")
			c := mustNew(t, client, WithPrefix(prefix))
			c.Config(100, window)
			cur := time.Now().Truncate(window)
			key := "client-" + prefix
			want := 0
			if tc.before {
				if err := c.IncrementBy(key, cur, 1); err != nil {
					t.Fatal(err)
				}
				want++
			}
			tag := hashOf(key)
			m := redistest.MigrateSlot(t, addrs, clusterslot.Of(tag))
			if tc.move {
				m.MoveKeys(t, prefix+":{"+tag+"}*")
			}
			for i := range 4 {
				if err := c.IncrementBy(key, cur, 2); err != nil {
					t.Fatalf("increment %d: %v", i, err)
				}
				want += 2
				n, prev, err := c.Get(key, cur, cur.Add(-window))
				if err != nil || n != want || prev != 0 {
					t.Fatalf("after increment %d: counts %d, %d (%v), want %d, 0", i, n, prev, err, want)
				}
				if i == 0 {
					tryAgains.Reset()
				}
			}
			if n := tryAgains.Count(); n != 0 {
				t.Errorf("%d TRYAGAIN replies after the first increment and read", n)
			}
		})
	}
}
