package redisstore

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redlimit/redlimit/internal/breaker"
)

// A breaker that changes state every 100 ms for two minutes gets at most
// one line per breakerLogEvery, each saying how many changes it did not
// tell, all of them counted; the latest change is logged at most
// breakerLogEvery after it, and a change after a quiet spell at once.
func TestBreakerLogBounded(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	type timer struct {
		at time.Time
		f  func()
	}
	var timers []timer
	var lines []string
	var at []time.Time
	total := 0
	l := newBreakerLog(func(c stateChange, skipped int) {
		lines = append(lines, fmt.Sprintf("%s>%s skipped=%d", c.from, c.to, skipped))
		at = append(at, now)
		total += skipped + 1
	})
	l.now = func() time.Time { return now }
	l.after = func(d time.Duration, f func()) { timers = append(timers, timer{now.Add(d), f}) }
	// advance moves the clock to to, running the timers due on the way.
	advance := func(to time.Time) {
		for {
			i := slices.IndexFunc(timers, func(tm timer) bool { return !tm.at.After(to) })
			if i < 0 {
				break
			}
			tm := timers[i]
			timers = slices.Delete(timers, i, i+1)
			now = tm.at
			tm.f()
		}
		now = to
	}
	states := []breaker.State{breaker.Open, breaker.HalfOpen}
	start := now
	changes := 0
	var latest string
	var last time.Time
	for ; now.Sub(start) < 2*time.Minute; changes++ {
		c := stateChange{states[(changes+1)%2], states[changes%2], "flapping"}
		l.changed(c)
		latest, last = fmt.Sprintf("%s>%s", c.from, c.to), now
		advance(now.Add(100 * time.Millisecond))
	}
	advance(now.Add(breakerLogEvery))
	if len(lines) > 2*60/int(breakerLogEvery/time.Second)+1 {
		t.Errorf("%d lines in two minutes, want at most one per %s:\n%v", len(lines), breakerLogEvery, lines)
	}
	for i := 1; i < len(at); i++ {
		if at[i].Sub(at[i-1]) < breakerLogEvery {
			t.Fatalf("lines %d and %d %s apart", i-1, i, at[i].Sub(at[i-1]))
		}
	}
	if total != changes {
		t.Errorf("lines and skipped account for %d changes, want %d", total, changes)
	}
	final := lines[len(lines)-1]
	if d := at[len(at)-1].Sub(last); d > breakerLogEvery || final[:len(latest)+1] != latest+" " {
		t.Errorf("last line %q %s after the last change %s", final, d, latest)
	}
	// A change after a quiet spell is logged at once, skipping nothing.
	advance(now.Add(time.Minute))
	n := len(lines)
	l.changed(stateChange{breaker.HalfOpen, breaker.Closed, "the probe succeeded"})
	if len(lines) != n+1 || lines[n] != "half-open>closed skipped=0" {
		t.Fatalf("after a quiet minute: %v", lines[n:])
	}
}
