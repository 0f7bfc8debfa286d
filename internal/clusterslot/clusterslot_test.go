package clusterslot

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Slots as Redis computes them (CLUSTER KEYSLOT), of hash tags as Cluster
// finds them in keys.
func TestOfAndTagOf(t *testing.T) {
	for _, tc := range []struct {
		key, tag string
		slot     int
	}{
		{"foo", "foo", 12182},
		{"rl:{foo}:fw:10:1000000", "foo", 12182},
		{"{user1000}.following", "user1000", 3443},
		{"foo{}{bar}", "foo{}{bar}", 8363},
		{"foo{{bar}}zap", "{bar", 4015},
		{"", "", 0},
	} {
		if got := TagOf(tc.key); got != tc.tag {
			t.Errorf("TagOf(%q) = %q, want %q", tc.key, got, tc.tag)
		}
		if got := Of(TagOf(tc.key)); got != tc.slot {
			t.Errorf("Of(TagOf(%q)) = %d, want %d", tc.key, got, tc.slot)
		}
	}
}

// redisError is an error reply, as go-redis returns it.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

// Only ASK and TRYAGAIN, wrapped or not, hold a slot, for Hold from when
// they were last seen; other slots and other errors are not held.
func TestMigratingHolds(t *testing.T) {
	var _ redis.Error = redisError("")
	start := time.Unix(1000, 0)
	for _, tc := range []struct {
		name string
		err  error
		held bool
	}{
		{"ask", redisError("ASK 12182 127.0.0.1:7001"), true},
		{"tryagain", redisError("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{"wrapped", fmt.Errorf("algorithms: redis: %w", redisError("TRYAGAIN Multiple keys")), true},
		{"moved", redisError("MOVED 12182 127.0.0.1:7001"), false},
		{"other", errors.New("i/o timeout"), false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m Migrating
			if m.Learn("foo", tc.err, start) != tc.held {
				t.Fatalf("Learn(%v) = %v, want %v", tc.err, !tc.held, tc.held)
			}
			at := func(d time.Duration) func() time.Time { return func() time.Time { return start.Add(d) } }
			if got := m.Holds("foo", at(Hold-time.Nanosecond)); got != tc.held {
				t.Errorf("just before Hold: held %v, want %v", got, tc.held)
			}
			if m.Holds("bar", at(0)) {
				t.Error("another slot is held")
			}
			if m.Holds("foo", at(Hold)) || m.n.Load() != 0 {
				t.Errorf("held after Hold (%d slots)", m.n.Load())
			}
		})
	}
}
