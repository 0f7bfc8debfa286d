package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/breaker"
	"github.com/redlimit/redlimit/internal/redistest"
)

// maxFast bounds each decision against a Redis that refuses connections: a
// fifth of the 100 ms deadline. What it guards against (a decision waiting
// for the deadline, or for go-redis's dial retries, 100 ms apart) takes at
// least 100 ms; a decision that does not wait takes well under a
// millisecond, and the rest is room for a loaded CI machine under -race.
const maxFast = 20 * time.Millisecond

// deadPort returns a loopback address nobody listens on.
func deadPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Against a Redis that refuses connections (killed, or a port nobody ever
// listened on) every decision is made locally within maxFast, from the
// first on, and the log says Redis refused: the first refused dial opens
// the breaker and ends every wait (see dialWatch), with go-redis's default
// client (which retries the dial for 400 ms), with ContextTimeoutEnabled
// (the call on the caller's goroutine), under the caller's own deadline,
// and with a pool of one, which go-redis stops dialing after one failed
// dial (its calls then fail only after its retries). The probe after the
// breaker's open time does not wait either (probeAside), and fails. With
// the eviction watch on (the default), New's read of the policy is the
// first refused dial, and New does not wait for it either.
func TestRefusedDecidesAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		killed  bool
		inline  bool
		callers time.Duration // the caller's context's deadline, if any
		pool    int
		watch   bool // the eviction watch on
	}{
		{name: "killed, default client", killed: true},
		{name: "never listened, default client"},
		{name: "never listened, ContextTimeoutEnabled", inline: true},
		{name: "never listened, the caller's deadline", callers: 80 * time.Millisecond},
		{name: "never listened, pool of one", pool: 1},
		{name: "never listened, the eviction watch on", watch: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var srv *redistest.Server
			addr := deadPort(t)
			if tc.killed {
				srv = redistest.StartServer(t)
				addr = srv.Addr
			}
			c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: tc.inline, PoolSize: tc.pool})
			defer c.Close()
			obs := &storeEvents{errors: map[ErrorKind]int{}}
			logs := &lineLog{}
			opts := []Option{WithObserver(obs), WithLogger(slog.New(logs))}
			if !tc.watch { // else its first read, at New, is the first refused dial
				opts = append(opts, WithEvictionAllowed())
			}
			began := time.Now()
			store := must(New(c, opts...))
			if took := time.Since(began); took > maxFast {
				t.Fatalf("New took %s, want within %s", took, maxFast)
			}
			l := mustNew(t, store, algorithms.FixedWindow, algorithms.PerMinute(1000))
			if srv != nil {
				if r, err := l.Allow(context.Background(), "warm", 1); err != nil || r.Decider != algorithms.DecidedByStore {
					t.Fatalf("before the kill: %+v %v", r, err)
				}
				srv.Kill() // the pool keeps its connections to the dead server
			}
			start := time.Now()
			for i := 0; time.Since(start) < 700*time.Millisecond; i++ { // past the 500 ms open time: a probe
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if tc.callers > 0 {
					ctx, cancel = context.WithTimeout(ctx, tc.callers)
				}
				began := time.Now()
				r, err := l.Allow(ctx, fmt.Sprint("k", i%5), 1)
				took := time.Since(began)
				cancel()
				if err != nil || !r.Allowed || r.Decider != algorithms.DecidedLocally || took > maxFast {
					t.Fatalf("decision %d at %s: %+v %v after %s, want allowed locally within %s",
						i, began.Sub(start).Round(time.Millisecond), r, err, took, maxFast)
				}
				if i == 0 && store.guard.breaker.Closed() {
					t.Fatal("the breaker is closed after the first refused connection")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if lines := logs.breakerLines(); len(lines) == 0 || !strings.Contains(lines[0], "reason=Redis refused the connection") {
				t.Errorf("breaker lines %q, want the first to say Redis refused the connection", lines)
			}
			if lines := logs.failureLines(); !tc.watch && (len(lines) == 0 || !strings.Contains(lines[0], "Redis refused the connection")) {
				t.Errorf("failures logged %q, want the first to say Redis refused the connection", lines)
			}
			// The probe failed: the breaker stays open for twice as long.
			for deadline := time.Now().Add(5 * time.Second); store.guard.breaker.OpenFor() != time.Second; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("open for %s, want 1s after one failed probe", store.guard.breaker.OpenFor())
				}
			}
			obs.mu.Lock()
			defer obs.mu.Unlock()
			if len(obs.breakers) != 1 || obs.breakers[0] != "rl true" {
				t.Errorf("breaker changes %v, want one opening", obs.breakers)
			}
		})
	}
}

// A refused dial ends every decision waiting for Redis within maxFast, the
// one whose call made the dial and those queued behind it (one call in
// flight), whether the store's deadline or the caller's binds them: here a
// second away, the dial held until all wait, and a pool of one, whose one
// dial (retried for 400 ms) the next call would wait for.
func TestRefusalEndsEveryWait(t *testing.T) {
	for _, callers := range []time.Duration{0, 900 * time.Millisecond} {
		t.Run(fmt.Sprintf("the caller's deadline %s", callers), func(t *testing.T) {
			gate := make(chan struct{})
			c := redis.NewClient(&redis.Options{Addr: deadPort(t), PoolSize: 1, Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
				<-gate
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}})
			defer c.Close()
			store := must(New(c, WithTimeout(time.Second), WithMaxInFlight(1), WithLogger(quietLogger()), WithEvictionAllowed()))
			l := mustNew(t, store, algorithms.FixedWindow, algorithms.PerMinute(1000))
			const n = 8
			ended := make([]time.Time, n)
			var wg sync.WaitGroup
			decide := func(i int) {
				wg.Go(func() {
					ctx, cancel := context.Background(), context.CancelFunc(func() {})
					if callers > 0 {
						ctx, cancel = context.WithTimeout(ctx, callers)
					}
					defer cancel()
					r, err := l.Allow(ctx, fmt.Sprint("k", i), 1)
					ended[i] = time.Now()
					if err != nil || r.Decider != algorithms.DecidedLocally {
						t.Errorf("decision %d: %+v %v, want decided locally", i, r, err)
					}
				})
			}
			b := store.guard.batcher
			waitFor := func(what string, ok func() bool) {
				for deadline := time.Now().Add(500 * time.Millisecond); ; time.Sleep(time.Millisecond) {
					b.mu.Lock()
					done := ok()
					b.mu.Unlock()
					if done {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("waiting for %s: %d queued, %d flushing", what, b.waiting, b.active)
					}
				}
			}
			decide(0)
			waitFor("the first to be sent", func() bool { return b.active == 1 && b.waiting == 0 })
			for i := 1; i < n; i++ {
				decide(i)
			}
			waitFor("the rest to queue", func() bool { return b.waiting == n-1 })
			refused := time.Now()
			close(gate)
			wg.Wait()
			for i, at := range ended {
				if took := at.Sub(refused); took > maxFast {
					t.Errorf("decision %d ended %s after the refused dial, want within %s", i, took, maxFast)
				}
			}
		})
	}
}

// A concurrency limit's Acquire against a port nobody listens on is decided
// locally within maxFast, the first refused dial ending its wait.
func TestRefusedAcquireAtOnce(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: deadPort(t)})
	defer c.Close()
	store := must(New(c, WithLogger(quietLogger()), WithEvictionAllowed())) // the Acquire's the first dial
	cl := mustConcurrency(t, store, 3, time.Minute)
	began := time.Now()
	lease, err := cl.Acquire(context.Background(), "k")
	if took := time.Since(began); err != nil || !lease.Allowed || lease.Decider != algorithms.DecidedLocally || took > maxFast {
		t.Fatalf("%+v %v after %s, want allowed locally within %s", lease, err, took, maxFast)
	}
	lease.Release(context.Background())
	if store.guard.breaker.Closed() {
		t.Fatal("the breaker is closed after a refused connection")
	}
}

// lineLog keeps the messages logged, with their attributes.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (h *lineLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *lineLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *lineLog) WithGroup(string) slog.Handler            { return h }
func (h *lineLog) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, line)
	return nil
}

// breakerLines returns the breaker's lines logged so far.
func (h *lineLog) breakerLines() []string { return h.matching("redlimit: Redis breaker") }

// failureLines returns the lines saying why Redis did not decide.
func (h *lineLog) failureLines() []string { return h.matching("redlimit: Redis could not decide") }

func (h *lineLog) matching(message string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range h.lines {
		if strings.Contains(l, message) {
			out = append(out, l)
		}
	}
	return out
}

// In a long outage under load (Redis killed, four goroutines deciding) the
// breaker backs off: each failed probe doubles its open time, 50 ms to the
// 400 ms cap, so the probes (and the changes of state) thin out instead of
// coming every 50 ms; the log says so in one line while the observer hears
// of one opening; and once Redis is back the store returns to it, the
// observer hearing of one closing and the log's next line saying closed.
func TestOutageBacksOff(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	logs := &lineLog{}
	obs := &storeEvents{errors: map[ErrorKind]int{}}
	const openFor, maxOpenFor, outage = 50 * time.Millisecond, 400 * time.Millisecond, 3 * time.Second
	store := must(New(c, WithLogger(slog.New(logs)), WithObserver(obs), WithBreaker(BreakerPolicy{OpenFor: openFor, MaxOpenFor: maxOpenFor})))
	l := mustNew(t, store, algorithms.FixedWindow, algorithms.PerMinute(1_000_000))
	ctx := context.Background()
	if r, err := l.Allow(ctx, "warm", 1); err != nil || r.Decider != algorithms.DecidedByStore {
		t.Fatalf("before the kill: %+v %v", r, err)
	}
	srv.Kill()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				if _, err := l.Allow(ctx, fmt.Sprint("k", g, i%20), 1); err != nil {
					t.Error(err)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	// The open time, sampled: each value it takes, and when it first did.
	var seen []time.Duration
	var at []time.Time
	for start := time.Now(); time.Since(start) < outage; time.Sleep(time.Millisecond) {
		if d := store.guard.breaker.OpenFor(); len(seen) == 0 || d != seen[len(seen)-1] {
			seen, at = append(seen, d), append(at, time.Now())
		}
	}
	stop.Store(true)
	wg.Wait()
	during := logs.breakerLines()
	store.guard.breakerLog.flush() // what the log holds back: every change is in a line or its skipped count
	changes := 0
	for _, line := range logs.breakerLines() {
		var skipped int
		if _, err := fmt.Sscanf(line[strings.Index(line, "skipped=")+len("skipped="):], "%d", &skipped); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		changes += 1 + skipped
	}
	t.Logf("open times %v; %d changes of state in %s; lines: %q", seen, changes, outage, logs.breakerLines())
	want := []time.Duration{openFor, 2 * openFor, 4 * openFor, maxOpenFor}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("open times %v, want %v", seen, want)
	}
	// Each doubling comes no sooner than the open time before it allows
	// (less what sampling every millisecond on a loaded machine may miss).
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < seen[i-1]-20*time.Millisecond {
			t.Errorf("open time %s came %s after %s: a probe came early", seen[i], gap, seen[i-1])
		}
	}
	// Probes no sooner than the open times allow: 50+100+200 ms, then one
	// every 400 ms, at most 9 in 3 s, each two changes, after the opening;
	// without the backoff, 60.
	if most := 1 + 2*(1+int((outage-7*openFor)/maxOpenFor)+3); changes > most {
		t.Errorf("%d changes of state in %s, want at most %d", changes, outage, most)
	}
	if len(during) != 1 || !strings.HasPrefix(during[0], "WARN redlimit: Redis breaker open from=closed") {
		t.Errorf("breaker lines during the outage %q, want the opening alone", during)
	}

	srv.Restart()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r, err := l.Allow(ctx, "back", 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Decider == algorithms.DecidedByStore {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the restart: %+v, want decided by Redis", r)
		}
	}
	store.guard.breakerLog.flush()
	lines := logs.breakerLines()
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "INFO redlimit: Redis breaker closed from=half-open") {
		t.Errorf("last breaker line %q, want closed", last)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if fmt.Sprint(obs.breakers) != "[rl true rl false]" {
		t.Errorf("breaker changes %v, want one opening and one closing", obs.breakers)
	}
	if st := store.guard.breaker.State(); st != breaker.Closed {
		t.Errorf("breaker %s after Redis answered, want closed", st)
	}
}
