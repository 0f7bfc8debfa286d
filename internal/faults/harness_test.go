package faults

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/redisstore"
)

// deadline is the Redis store's default decision deadline, and slack what
// a decision may take beyond it.
const (
	deadline = redisstore.DefaultTimeout
	slack    = 50 * time.Millisecond
)

// clientKind is a way users build their go-redis client.
type clientKind struct {
	name    string
	options func(o *redis.Options)
}

// clientKinds are the clients each fault is tried with: go-redis's
// defaults (3 retries, 3 s read timeout, no context deadlines on sockets),
// and the README's recommendation (commands bounded by their context's
// deadline, so an idle store's decisions go out on the caller's
// goroutine).
var clientKinds = []clientKind{
	{"default client", func(*redis.Options) {}},
	{"recommended client", func(o *redis.Options) { o.ContextTimeoutEnabled = true }},
}

// newClient returns a client of kind k for addr, closed when the test ends.
func newClient(t *testing.T, k clientKind, addr string) *redis.Client {
	o := &redis.Options{Addr: addr}
	k.options(o)
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// quiet is the store's logger in these tests: failures are expected.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newLimiter returns a fixed-window limiter of rate a minute on client:
// no window rolls over within a test.
func newLimiter(t *testing.T, client redis.UniversalClient, rate int, opts ...redisstore.Option) algorithms.Limiter {
	t.Helper()
	store := must(redisstore.New(client, append([]redisstore.Option{redisstore.WithLogger(quiet)}, opts...)...))
	l, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(rate))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// decision is one Allow as the load saw it.
type decision struct {
	key     string
	at      time.Time // when it was asked
	took    time.Duration
	allowed bool
	by      algorithms.Decider
	err     error
}

// load asks l for keys, round-robin, from workers goroutines until stop is
// closed, and returns every decision.
func load(l algorithms.Limiter, keys []string, workers int, stop <-chan struct{}) func() []decision {
	var mu sync.Mutex
	var all []decision
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var mine []decision
			for i := w; ; i++ {
				select {
				case <-stop:
					mu.Lock()
					all = append(all, mine...)
					mu.Unlock()
					return
				default:
				}
				key := keys[i%len(keys)]
				start := time.Now()
				res, err := l.Allow(context.Background(), key, 1)
				mine = append(mine, decision{key: key, at: start, took: time.Since(start), allowed: res.Allowed, by: res.Decider, err: err})
				time.Sleep(time.Millisecond) // a steady stream, not a spin
			}
		})
	}
	return func() []decision {
		wg.Wait()
		return all
	}
}

// runLoad runs load around fault, which gets the time the fault began and
// must return when it ended, and returns the decisions and that time.
func runLoad(l algorithms.Limiter, keys []string, workers int, settle time.Duration, fault func()) ([]decision, time.Time) {
	stop := make(chan struct{})
	wait := load(l, keys, workers, stop)
	fault()
	ended := time.Now()
	time.Sleep(settle)
	close(stop)
	return wait(), ended
}

// summary is what the checks need of a run's decisions.
type summary struct {
	n          int
	late       []decision // took longer than deadline + slack
	errs       []decision
	allowed    map[string]map[algorithms.Decider]int // by key, then decider
	lastOff    time.Time                             // the last decision not made by Redis
	firstStore time.Time                             // the first decision by Redis after the fault ended
}

func summarize(ds []decision, faultEnded time.Time) summary {
	s := summary{n: len(ds), allowed: map[string]map[algorithms.Decider]int{}}
	for _, d := range ds {
		if d.took > deadline+slack {
			s.late = append(s.late, d)
		}
		if d.err != nil {
			s.errs = append(s.errs, d)
		}
		if d.allowed {
			if s.allowed[d.key] == nil {
				s.allowed[d.key] = map[algorithms.Decider]int{}
			}
			s.allowed[d.key][d.by]++
		}
		byRedis := d.by == algorithms.DecidedByStore || d.by == algorithms.DecidedByCache
		if !byRedis && d.at.After(s.lastOff) {
			s.lastOff = d.at
		}
		if byRedis && d.at.After(faultEnded) && (s.firstStore.IsZero() || d.at.Before(s.firstStore)) {
			s.firstStore = d.at
		}
	}
	return s
}

// checkCommon fails the test for late answers and errors, the promises of
// every fault.
func (s summary) checkCommon(t *testing.T) {
	t.Helper()
	if s.n == 0 {
		t.Fatal("no decisions were made")
	}
	if len(s.late) > 0 {
		d := s.late[0]
		t.Errorf("%d of %d decisions took longer than %s, e.g. %s (%s)", len(s.late), s.n, deadline+slack, d.took, d.by)
	}
	if len(s.errs) > 0 {
		t.Errorf("%d of %d decisions failed, e.g. %v", len(s.errs), s.n, s.errs[0].err)
	}
}

// checkBackWithin fails the test unless every decision from within of the
// fault's end on was made by Redis.
func (s summary) checkBackWithin(t *testing.T, faultEnded time.Time, within time.Duration) {
	t.Helper()
	if s.firstStore.IsZero() {
		t.Fatalf("no decision by Redis after the fault ended")
	}
	if back := s.lastOff.Sub(faultEnded); back > within {
		t.Errorf("decisions not made by Redis until %s after the fault ended, want within %s", back, within)
	}
}

// allowedBy is how many requests for key the deciders admitted.
func (s summary) allowedBy(key string, by ...algorithms.Decider) int {
	n := 0
	for _, d := range by {
		n += s.allowed[key][d]
	}
	return n
}
