package redisstore

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redlimit/redlimit/algorithms"
)

// Redis's clock steps (miniredis: the scripts read its TIME). A lease taken
// while the clock was an hour ahead holds its slot at most a lease after
// the clock is set right, as the rate scripts' states do; a longer lease of
// another limiter on the same key is not cut short by a shorter one's
// correction.
func TestRedisConcurrencyClockWasAhead(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer c.Close()
	store := must(New(c, WithTimeout(time.Minute)))
	short := mustConcurrency(t, store, 2, time.Second)
	long := mustConcurrency(t, store, 2, time.Hour)
	steps := []struct {
		at      time.Duration // Redis's clock, from start
		l       algorithms.ConcurrencyLimiter
		allowed bool
		held    int
	}{
		{time.Hour, short, true, 1}, // the clock is an hour fast; never released
		{0, long, true, 2},          // set right: both held
		{0, short, false, 2},
		{1100 * time.Millisecond, short, true, 2}, // the first expired a lease after the correction
		{3 * time.Second, short, true, 2},         // the second, too; the long one holds
		{3 * time.Second, short, false, 2},
	}
	for i, s := range steps {
		m.SetTime(start.Add(s.at))
		lease := mustAcquire(t, s.l, "k")
		if lease.Allowed != s.allowed || lease.InFlight != s.held {
			t.Fatalf("step %d at %s: %+v; want allowed %v with %d held", i, s.at, lease, s.allowed, s.held)
		}
	}
}
