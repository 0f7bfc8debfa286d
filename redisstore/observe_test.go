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
	l, err := algorithms.New(New(c, WithObserver(obs), WithPrefix("obs"), WithLogger(quietLogger()), WithMaxInFlight(8)), algorithms.FixedWindow, algorithms.PerMinute(5))
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
	srv.Stop()
	for i := range 6 { // keys of their own: one call each
		if _, err := l.Allow(ctx, fmt.Sprint("b", i), 1); err != nil {
			t.Fatal(err)
		}
	}
	// The calls outlive their requests' deadline: wait for them to fail.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		obs.mu.Lock()
		n := len(obs.breakers)
		obs.mu.Unlock()
		if n > 0 {
			break
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	// The OOM reply does not count towards the breaker; five refused
	// connections open it, and the sixth request is not sent.
	if obs.errors[ErrorScript] != 1 || obs.errors[ErrorConnection] != 5 {
		t.Errorf("errors %v, want 1 script and 5 connection", obs.errors)
	}
	if len(obs.breakers) != 1 || obs.breakers[0] != "obs true" {
		t.Errorf("breaker changes %v, want [obs true]", obs.breakers)
	}
}

// A stopped Redis is a connection failure, not a timeout, with go-redis's
// default client, whose retries of refused dials outlast the call's
// deadline; a frozen one, which accepts connections but never answers,
// stays a timeout.
func TestStoppedRedisCountsAsConnection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(*redistest.Server)
		want  ErrorKind
	}{
		{"stopped", (*redistest.Server).Stop, ErrorConnection},
		{"frozen", func(s *redistest.Server) { s.Freeze(); t.Cleanup(s.Thaw) }, ErrorTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr})
			defer c.Close()
			obs := &storeEvents{errors: map[ErrorKind]int{}}
			l, err := algorithms.New(New(c, WithObserver(obs), WithLogger(quietLogger()), WithMaxInFlight(8)), algorithms.FixedWindow, algorithms.PerMinute(5))
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
			if got := waitErrors(obs, 4); got[tc.want] != 4 || len(got) != 1 {
				t.Errorf("errors %v, want 4 %s", got, tc.want)
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
