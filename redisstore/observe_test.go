package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/breaker"
	"github.com/redlimit/redlimit/internal/redistest"
)

func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want ErrorKind
	}{
		{fmt.Errorf("algorithms: %w", context.DeadlineExceeded), ErrorTimeout},
		{&net.OpError{Op: "read", Err: timeoutError{}}, ErrorTimeout},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, ErrorConnection},
		{fmt.Errorf("x: %w", io.EOF), ErrorConnection},
		{redis.ErrClosed, ErrorConnection},
		{fmt.Errorf("%w: %q", ErrUnexpectedReply, "junk"), ErrorScript},
		{errors.New("something else"), ErrorOther},
	} {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("classify(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

type storeEvents struct {
	mu       sync.Mutex
	errors   map[ErrorKind]int
	breakers []string
}

func (o *storeEvents) StoreError(k ErrorKind) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errors[k]++
}

func (o *storeEvents) BreakerChanged(store string, open bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.breakers = append(o.breakers, fmt.Sprintf("%s %v", store, open))
}

// A script error (OOM) and a refused connection reach the observer by kind;
// the breaker's opening names the store.
func TestStoreObserver(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer c.Close()
	obs := &storeEvents{errors: map[ErrorKind]int{}}
	// Enough calls in flight that each request below is a call of its own
	// (its key's), however long the refused dials take: the breaker counts
	// calls, the observer keys.
	st := must(New(c, WithObserver(obs), WithPrefix("obs"), WithLogger(quietLogger()), WithMaxInFlight(8)))
	l, err := algorithms.New(st, algorithms.FixedWindow, algorithms.PerMinute(5))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Allow(ctx, "a", 1); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if r, err := l.Allow(ctx, "new", 1); err != nil || r.Decider != algorithms.DecidedLocally {
		t.Fatalf("under OOM: %+v %v", r, err)
	}
	// The local admission is owed to Redis: once Redis has room again the
	// settler charges it (its tries are not the observer's) and stops, so
	// that the first call to meet the stopped server below is a request's.
	if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the owed charge settled", func() bool {
		owed, gates, retrying := owedLen(st.guard.batcher)
		return owed == 0 && gates == 0 && !retrying
	})
	srv.Stop()
	for i := range 6 { // keys of their own: one call each, were they sent
		if _, err := l.Allow(ctx, fmt.Sprint("b", i), 1); err != nil {
			t.Fatal(err)
		}
	}
	// The first refused connection opens the breaker, and the other five
	// requests are not sent. The OOM reply does not count towards the
	// breaker.
	eventually(t, "a connection error observed", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return obs.errors[ErrorConnection] > 0
	})
	time.Sleep(200 * time.Millisecond) // for any further report to land
	if got := waitErrors(obs, 2); got[ErrorScript] != 1 || got[ErrorConnection] != 1 || len(got) != 2 {
		t.Errorf("errors %v, want 1 script and 1 connection", got)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.breakers) != 1 || obs.breakers[0] != "obs true" {
		t.Errorf("breaker changes %v, want [obs true]", obs.breakers)
	}
}

// A stopped Redis is a connection failure, not a timeout, with go-redis's
// default client, whose retries of refused dials outlast the call's
// deadline (and the refused dial opens the breaker: the other requests are
// not sent); a frozen one, which accepts connections but never answers,
// stays a timeout.
func TestStoppedRedisCountsAsConnection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(*redistest.Server)
		want  ErrorKind
		calls int
		open  bool
	}{
		{"stopped", (*redistest.Server).Stop, ErrorConnection, 1, true},
		{"frozen", func(s *redistest.Server) { s.Freeze(); t.Cleanup(s.Thaw) }, ErrorTimeout, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr})
			defer c.Close()
			obs := &storeEvents{errors: map[ErrorKind]int{}}
			store := must(New(c, WithObserver(obs), WithLogger(quietLogger()), WithMaxInFlight(8)))
			l, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(5))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := l.Allow(ctx, "a", 1); err != nil {
				t.Fatal(err)
			}
			tc.fault(srv)
			for i := range 4 { // under the five failures that open the breaker
				if r, err := l.Allow(ctx, fmt.Sprint("b", i), 1); err != nil || r.Decider != algorithms.DecidedLocally {
					t.Fatalf("%+v %v, want decided locally", r, err)
				}
			}
			if open := store.guard.breaker.State() == breaker.Open; open != tc.open {
				t.Errorf("breaker open %v, want %v", open, tc.open)
			}
			if got := waitErrors(obs, tc.calls); got[tc.want] != tc.calls || len(got) != 1 {
				t.Errorf("errors %v, want %d %s", got, tc.calls, tc.want)
			}
		})
	}
}

// waitErrors waits for n errors to reach obs, at most fifteen seconds, and
// returns them by kind: the calls outlive their requests' deadline, and a
// default client reads a frozen server's reply for its ReadTimeout (3 s)
// before it gives up.
func waitErrors(obs *storeEvents, n int) map[ErrorKind]int {
	var got map[ErrorKind]int
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		obs.mu.Lock()
		got = maps.Clone(obs.errors)
		obs.mu.Unlock()
		total := 0
		for _, v := range got {
			total += v
		}
		if total >= n {
			break
		}
	}
	return got
}
