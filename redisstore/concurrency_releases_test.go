package redisstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// queuedLen returns how many leases the line holds and whether its
// goroutine runs.
func (r *releaseLine) queuedLen() (n int, running bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.owed), r.running
}

// waitLineEmpty waits up to within for the line to hold nothing.
func waitLineEmpty(t *testing.T, r *releaseLine, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(5 * time.Millisecond) {
		n, running := r.queuedLen()
		if n == 0 && !running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the release line holds %d leases (running %v) after %s", n, running, within)
		}
	}
}

// A lease is queued once however often it is given; a full line takes no
// new lease but one it holds, and takes one again once a lease whose call
// was never written is dropped; a closed line takes nothing and holds
// nothing.
func TestReleaseLineAdd(t *testing.T) {
	r := newReleaseLine(nil, time.Second, time.Second, nil)
	r.capacity = 2
	r.running = true // no goroutine: this test sends nothing
	a, b, c := redisLease{"s", "a", 1}, redisLease{"s", "b", 2}, redisLease{"s", "c", 3}
	for i, step := range []struct {
		close bool
		drop  *redisLease
		h     redisLease
		want  queued
		n     int
	}{
		{h: a, want: queuedOK, n: 1},
		{h: a, want: queuedOK, n: 1},
		{h: b, want: queuedOK, n: 2},
		{h: c, want: queuedFull, n: 2},
		{h: b, want: queuedOK, n: 2},
		{drop: &a, h: c, want: queuedOK, n: 2},
		{close: true, h: c, want: queuedClosed, n: 0},
	} {
		if step.drop != nil {
			r.drop(*step.drop)
		}
		if step.close {
			r.stop()
			r.dropAll()
		}
		if got := r.add(step.h); got != step.want {
			t.Errorf("step %d: add(%s) = %d, want %d", i, step.h.member, got, step.want)
		}
		if n, _ := r.queuedLen(); n != step.n {
			t.Errorf("step %d: %d queued, want %d", i, n, step.n)
		}
	}
}

// memberHook records the lease id of the last acquire call sent.
type memberHook struct{ last atomic.Value }

func (h *memberHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *memberHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *memberHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if m, ok := args[len(args)-1].(*memberArg); ok {
			h.last.Store(m.String())
		}
		return next(ctx, cmd)
	}
}

// A copy of an acquire's call that reaches Redis after its lease was
// released (go-redis sent it again, or it waited in Redis's input) grants
// nothing: whether Redis granted the lease to a call written twice, or the
// lease was in doubt (the reply lost, the Acquire gave up waiting) and the
// release line removed it, the release leaves a tombstone for onceTTL that
// the script obeys. A call written once and answered, which has no copy,
// is released with one ZREM and leaves no tombstone.
func TestConcurrencyResendAfterRelease(t *testing.T) {
	counts := &dropCounts{}
	proxyAddr, direct := lossyRedis(t, counts)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		retries int
		drop    int32 // replies lost
		pause   bool  // Redis paused: the Acquire gives up
		decider algorithms.Decider
		tomb    bool
	}{
		{"granted/written-twice", 0, 1, false, algorithms.DecidedByStore, true},
		{"granted/written-once", 0, 0, false, algorithms.DecidedByStore, false},
		{"reply-lost/not-resent", -1, 1, false, algorithms.DecidedLocally, true},
		{"gave-up-waiting", -1, 0, true, algorithms.DecidedLocally, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: proxyAddr, MaxRetries: tc.retries})
			defer c.Close()
			hook := &memberHook{}
			c.AddHook(hook)
			prefix := strings.ReplaceAll(tc.name, "/", "-")
			st := must(New(c, WithPrefix(prefix), WithTimeout(50*ms), WithLogger(quietLogger())))
			defer st.Close(closeCtx())
			l := mustConcurrency(t, st, 1, time.Hour)
			if err := mustAcquire(t, l, "warm").Release(ctx); err != nil { // loads the script
				t.Fatal(err)
			}
			if tc.pause {
				if err := direct.Do(ctx, "CLIENT", "PAUSE", "200", "ALL").Err(); err != nil {
					t.Fatal(err)
				}
			}
			counts.arm(tc.drop)
			lease := mustAcquire(t, l, "k")
			counts.arm(0)
			if !lease.Allowed || lease.Decider != tc.decider {
				t.Fatalf("%+v, want allowed by %s", lease, tc.decider)
			}
			member := hook.last.Load().(string)
			_ = lease.Release(ctx)
			time.Sleep(250 * time.Millisecond) // the pause is over, the call answered
			waitLineEmpty(t, st.guard.releases, time.Second)
			set := prefix + ":{k}:cc"
			h := redisLease{rkey: set, member: member}
			if n := direct.ZCard(ctx, set).Val(); n != 0 {
				t.Fatalf("%d leases held after the release", n)
			}
			ttl := direct.PTTL(ctx, h.tombstone()).Val()
			if tombed := ttl > 0 && ttl <= onceTTL(50*ms); tombed != tc.tomb {
				t.Fatalf("tombstone %q for %s; want one (at most %s): %v", h.tombstone(), ttl, onceTTL(50*ms), tc.tomb)
			}
			if !tc.tomb {
				return
			}
			// The copy: the same call, with the same lease id.
			reply, err := concurrencyScript.Run(ctx, direct, []string{set, h.tombstone()}, "1", "3600000000", member).Text()
			if err != nil || !strings.HasPrefix(reply, "2 ") {
				t.Errorf("a copy of the call after the release: %q, %v; want \"2 ...\", nothing granted", reply, err)
			}
			if n := direct.ZCard(ctx, set).Val(); n != 0 {
				t.Errorf("a copy of the call after the release took the lease again: %d held", n)
			}
		})
	}
}

// A full release line refuses locally (under FailLocal) an Acquire whose
// lease Redis may hold and that would need a new entry, while FailOpen
// admits and FailClosed refuses as ever; a Release that cannot reach
// Redis while the line is full leaves its lease in Redis, to expire. The
// leases the line took leave Redis once it answers.
func TestReleaseLineFull(t *testing.T) {
	for _, tc := range []struct {
		mode    FailureMode
		allowed []bool
		decider algorithms.Decider
	}{
		{FailLocal, []bool{true, true, false}, algorithms.DecidedLocally},
		{FailOpen, []bool{true, true, true}, algorithms.DecidedFailOpen},
		{FailClosed, []bool{false, false, false}, algorithms.DecidedFailClosed},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			srv := redistest.StartServer(t)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
			defer c.Close()
			direct := redis.NewClient(&redis.Options{Addr: srv.Addr})
			defer direct.Close()
			st := must(New(c, WithTimeout(50*ms), WithFailureMode(tc.mode), WithLogger(quietLogger())))
			defer st.Close(closeCtx())
			st.guard.releases.capacity = 2
			l := mustConcurrency(t, st, 1, time.Minute)
			ctx := context.Background()
			before := mustAcquire(t, l, "before")
			if _, err := srv.Do("CLIENT", "PAUSE", "500", "ALL"); err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.allowed {
				lease := mustAcquire(t, l, fmt.Sprint("k", i))
				if lease.Allowed != want || lease.Decider != tc.decider {
					t.Errorf("acquire %d with %d queued: %+v; want allowed %v by %s", i, i, lease, want, tc.decider)
				}
				_ = lease.Release(ctx)
			}
			if err := before.Release(ctx); err == nil || !strings.Contains(err.Error(), "expires after") {
				t.Errorf("a release with the line full: %v; want the lease left to expire", err)
			}
			time.Sleep(600 * time.Millisecond) // the pause is over
			for i := range tc.allowed {
				if held := leasesGone(t, direct, fmt.Sprint("rl:{k", i, "}:cc"), time.Second); len(held) != 0 {
					t.Errorf("acquire %d: %v held in Redis a second after the pause", i, held)
				}
			}
			if n := direct.ZCard(ctx, "rl:{before}:cc").Val(); n != 1 {
				t.Errorf("%d leases held for the release the full line could not take; want 1, left to expire", n)
			}
		})
	}
}

// Close stops the release line's goroutine and waits for it, without
// waiting for Redis: a frozen Redis holds Close no longer than a moment.
// A closed line takes nothing, and a limiter of the closed store still
// admits locally while Redis cannot answer.
func TestReleaseLineClose(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer c.Close()
	st := must(New(c, WithTimeout(50*ms), WithLogger(quietLogger())))
	l := mustConcurrency(t, st, 1, time.Minute)
	if err := mustAcquire(t, l, "warm").Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	defer srv.Thaw()
	for i := range 3 {
		if lease := mustAcquire(t, l, fmt.Sprint("k", i)); !lease.Allowed || lease.Decider != algorithms.DecidedLocally {
			t.Fatalf("acquire %d in the freeze: %+v", i, lease)
		}
	}
	time.Sleep(100 * time.Millisecond) // the line's batch waits for Redis
	if n, running := st.guard.releases.queuedLen(); n != 3 || !running {
		t.Fatalf("%d queued, running %v; want 3 being sent", n, running)
	}
	lines := lineGoroutines() // this store's, and those of other tests' stores that retry still
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := st.Close(ctx)
	if d := time.Since(began); d > 500*time.Millisecond {
		t.Errorf("Close took %s with Redis frozen and a context of 100ms", d)
	}
	if !errors.Is(err, ErrUnsent) || !strings.Contains(err.Error(), "3 concurrency leases") {
		t.Errorf("Close with Redis frozen: %v; want ErrUnsent for 3 concurrency leases", err)
	}
	if after := lineGoroutines(); after != lines-1 {
		t.Errorf("%d release line goroutines before Close, %d right after; want one fewer", lines, after)
	}
	if n, running := st.guard.releases.queuedLen(); n != 0 || running {
		t.Errorf("after Close: %d queued, running %v", n, running)
	}
	if lease := mustAcquire(t, l, "after"); !lease.Allowed || lease.Decider != algorithms.DecidedLocally {
		t.Errorf("acquire after Close in the freeze: %+v; want admitted locally", lease)
	}
}

// lineGoroutines counts the goroutines of release lines in the process.
func lineGoroutines() int {
	buf := make([]byte, 1<<22)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "(*releaseLine).run(")
}

// pipelineCount counts the pipelines a client sends and their commands.
type pipelineCount struct {
	mu             sync.Mutex
	pipelines, cmd int
}

func (p *pipelineCount) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipelineCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelineCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		p.mu.Lock()
		p.pipelines++
		p.cmd += len(cmds)
		p.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (p *pipelineCount) take() (pipelines, cmds int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pipelines, cmds = p.pipelines, p.cmd
	p.pipelines, p.cmd = 0, 0
	return pipelines, cmds
}

// While Redis does not answer, the line backs off (a few attempts a
// second, not a busy loop); once it answers, the line drains in pipelined
// batches (releaseBatch leases), one after the other: 300 leases in 3
// pipelines, each setting the tombstones and removing the leases.
func TestReleaseLineBatchesAndBackoff(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	count := &pipelineCount{}
	c.AddHook(count)
	st := must(New(c, WithLogger(quietLogger())))
	defer st.Close(closeCtx())
	srv.Kill()
	const n = 300
	for i := range n {
		st.guard.releases.add(redisLease{rkey: "rl:{b}:cc", member: fmt.Sprint(i), id: uint64(i)})
	}
	time.Sleep(time.Second)
	if tries, _ := count.take(); tries < 3 || tries > 10 {
		t.Errorf("%d attempts in a second while Redis was down; want a few (backing off to %s)", tries, releaseRetryMax)
	}
	srv.Restart()
	began := time.Now()
	count.take()
	waitLineEmpty(t, st.guard.releases, 2*releaseRetryMax+time.Second)
	pipelines, cmds := count.take()
	t.Logf("drained %d leases %s after Redis was back, in %d pipelines of %d commands", n, time.Since(began), pipelines, cmds)
	// Batches of at least 100 leases, and the new connection's handshake.
	if pipelines > (n+99)/100+1 || cmds > 2*n+2*100 {
		t.Errorf("%d pipelines, %d commands for %d leases; want batches of at least 100", pipelines, cmds, n)
	}
	direct := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer direct.Close()
	if keys := direct.DBSize(context.Background()).Val(); keys != n {
		t.Errorf("%d keys in Redis, want the %d tombstones", keys, n)
	}
}
