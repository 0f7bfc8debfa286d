package redisstore

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redlimit/redlimit/internal/breaker"
)

// breakerLogEvery is the least time between two lines of a store's
// breaker log: at most four lines a minute, however often the breaker
// changes state.
const breakerLogEvery = 15 * time.Second

// breakerLog logs a store's breaker's changes of state.
//
// Invariant: at most one line per breakerLogEvery, and the latest change is
// always logged, at most breakerLogEvery after it happened: a change within
// breakerLogEvery of the last line is counted, not logged, and the latest
// change counted is logged when that time is up, with skipped, the number
// of changes before it that no line told. A line that follows none skipped
// says skipped=0. Proved by TestBreakerLogBounded, and by TestOutageBacksOff
// against a stopped Redis.
type breakerLog struct {
	every time.Duration
	now   func() time.Time                 // the wall clock's monotonic reading: log volume is real time
	after func(time.Duration, func())      // runs a function later
	emit  func(c stateChange, skipped int) // writes one line
	mu    sync.Mutex
	last  time.Time   // when the last line was written; zero before the first
	held  stateChange // the latest change not logged
	count int         // changes not logged since the last line
	// closed: the store is closed; the change held was logged, and the
	// changes from then on are logged at once.
	closed bool
}

// stateChange is one change of the breaker's state.
type stateChange struct {
	from, to breaker.State
	reason   string
}

func newBreakerLog(emit func(c stateChange, skipped int)) *breakerLog {
	return &breakerLog{every: breakerLogEvery, now: time.Now, emit: emit,
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

// changed logs c now, or counts it and has it logged when breakerLogEvery
// has passed since the last line. Lines are written under the lock, so
// that they come out in the order of the changes.
func (l *breakerLog) changed(c stateChange) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.closed || l.count == 0 && (l.last.IsZero() || now.Sub(l.last) >= l.every) {
		l.last = now
		l.emit(c, 0)
		return
	}
	l.held = c
	l.count++
	if l.count == 1 { // the first held since the last line: write it when due
		l.after(l.last.Add(l.every).Sub(now), l.flush)
	}
}

// close logs the change held now, if any, and every later change at once,
// so that no timer is left waiting on the store's behalf (one already set
// finds nothing held).
func (l *breakerLog) close() {
	l.flush()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
}

// flush writes the latest change held, and how many before it were not
// logged.
func (l *breakerLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.count == 0 {
		return
	}
	l.last = l.now()
	l.emit(l.held, l.count-1)
	l.count = 0
}

// logBreaker writes a line of the breaker log of g: the change c, the
// changes not logged before it (skipped), and for an open breaker how long
// it now stays open before a probe.
func (g *guard) logBreaker(c stateChange, skipped int) {
	level := slog.LevelWarn
	attrs := []slog.Attr{slog.String("from", c.from.String()), slog.String("reason", c.reason),
		slog.String("failure_mode", g.mode.String()), slog.Int("skipped", skipped)}
	switch c.to {
	case breaker.Closed:
		level = slog.LevelInfo
	case breaker.Open:
		attrs = append(attrs, slog.Duration("open_for", g.breaker.OpenFor()))
	}
	g.logger.LogAttrs(context.Background(), level, "redlimit: Redis breaker "+c.to.String(), attrs...)
}

// breakerChanged is told of each change of the breaker's state: the
// observer hears of every opening and closing, the log as breakerLog
// allows.
func (g *guard) breakerChanged(from, to breaker.State, reason string) {
	if g.observer != nil && (from == breaker.Closed) != (to == breaker.Closed) {
		g.observer.BreakerChanged(g.name, to != breaker.Closed)
	}
	g.breakerLog.changed(stateChange{from, to, reason})
}
