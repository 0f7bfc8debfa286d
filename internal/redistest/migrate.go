package redistest

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Migration is a Cluster slot set to move from its owner, Source, to
// Target (MIGRATING on the one, IMPORTING on the other), as redis-cli
// --cluster reshard sets it before it moves the slot's keys.
type Migration struct {
	Slot           int
	Source, Target string // the nodes' addresses
}

// MigrateSlot starts moving slot from the node of addrs that owns it to
// another, and leaves it there, half-way, until the test ends: then the
// slot is set STABLE on both nodes, with its owner. The keys stay where
// they are until MoveKeys moves some.
func MigrateSlot(t testing.TB, addrs []string, slot int) *Migration {
	t.Helper()
	nodes, err := command(addrs[0], time.Second, "CLUSTER", "NODES")
	if err != nil {
		t.Fatalf("redistest: CLUSTER NODES: %v", err)
	}
	var sourceID, targetID string
	m := &Migration{Slot: slot}
	for line := range strings.Lines(nodes) {
		f := strings.Fields(line)
		if len(f) < 8 || !strings.Contains(f[2], "master") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		switch {
		case ownsSlot(f[8:], slot):
			m.Source, sourceID = addr, f[0]
		case targetID == "":
			m.Target, targetID = addr, f[0]
		}
	}
	if sourceID == "" || targetID == "" {
		t.Fatalf("redistest: no owner of slot %d, or no other master, in:\n%s", slot, nodes)
	}
	s := strconv.Itoa(slot)
	for _, step := range []struct{ addr, state, id string }{
		{m.Target, "IMPORTING", sourceID},
		{m.Source, "MIGRATING", targetID},
	} {
		if _, err := command(step.addr, time.Second, "CLUSTER", "SETSLOT", s, step.state, step.id); err != nil {
			t.Fatalf("redistest: CLUSTER SETSLOT %s %s on %s: %v", s, step.state, step.addr, err)
		}
	}
	t.Cleanup(func() {
		for _, addr := range []string{m.Source, m.Target} {
			if _, err := command(addr, time.Second, "CLUSTER", "SETSLOT", s, "STABLE"); err != nil {
				t.Errorf("redistest: restoring slot %s on %s: %v", s, addr, err)
			}
		}
	})
	return m
}

// ownsSlot reports whether the slot ranges of a CLUSTER NODES line
// ("5461-10922", "42"; "[...]" marks a migration) hold slot.
func ownsSlot(ranges []string, slot int) bool {
	for _, r := range ranges {
		if strings.HasPrefix(r, "[") {
			continue
		}
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if errA == nil && errB == nil && a <= slot && slot <= b {
			return true
		}
	}
	return false
}

// MoveKeys moves the source's keys that match pattern (KEYS) to the
// target with MIGRATE, as a reshard moves a slot's keys a batch at a time,
// and returns them. It fails the test when none matches.
func (m *Migration) MoveKeys(t testing.TB, pattern string) []string {
	t.Helper()
	list, err := command(m.Source, time.Second, "KEYS", pattern)
	if err != nil || list == "" {
		t.Fatalf("redistest: keys %q on %s: %q, %v", pattern, m.Source, list, err)
	}
	keys := strings.Split(list, "\n")
	host, port, err := net.SplitHostPort(m.Target)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}, keys...)
	if _, err := command(m.Source, 5*time.Second, args...); err != nil {
		t.Fatalf("redistest: MIGRATE %q to %s: %v", keys, m.Target, err)
	}
	return keys
}

// String describes the migration, for test logs.
func (m *Migration) String() string {
	return fmt.Sprintf("slot %d from %s to %s", m.Slot, m.Source, m.Target)
}
