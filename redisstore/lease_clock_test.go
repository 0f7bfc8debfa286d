package redisstore

import (
	"testing"
	"time"
)

// The leases' default clock never goes back, starts at the wall time and
// measures elapsed time at least as the monotonic clock does; under
// WithClock it is that clock.
func TestLeaseClockMonotonic(t *testing.T) {
	before := time.Now().UnixNano()
	now := leaseClock(time.Now, false)
	first := now()
	if first < before || first > time.Now().UnixNano()+int64(time.Millisecond) {
		t.Fatalf("first reading %d, want about the wall time %d", first, before)
	}
	start, last := time.Now(), first
	for range 10_000 {
		r := now()
		if r < last {
			t.Fatalf("reading %d after %d: went back", r, last)
		}
		last = r
	}
	time.Sleep(20 * time.Millisecond)
	want := int64(time.Since(start))
	if got := now() - first; got < want {
		t.Errorf("%v elapsed on the lease clock, want at least the monotonic %v", time.Duration(got), time.Duration(want))
	}

	fake := time.Unix(1_000, 5)
	set := leaseClock(func() time.Time { return fake }, true)
	if got := set(); got != fake.UnixNano() {
		t.Errorf("under WithClock: %d, want the clock's %d", got, fake.UnixNano())
	}
	fake = fake.Add(-time.Hour) // a test clock may go anywhere
	if got := set(); got != fake.UnixNano() {
		t.Errorf("under WithClock, moved: %d, want %d", got, fake.UnixNano())
	}
}
