package algorithms_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
)

// waitLimiter returns a limiter of alg and lim on a fresh memory store.
func waitLimiter(t *testing.T, alg algorithms.Algorithm, lim algorithms.Limit) algorithms.RateLimiter {
	t.Helper()
	store, err := memstore.New()
	if err != nil {
		t.Fatal(err)
	}
	l, err := algorithms.New(store, alg, lim)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Wait refuses what no wait could admit, at once, consuming nothing and
// never panicking: a nil limiter, a cost below 1, a cost above the quota,
// an empty key, a context already ended.
func TestWaitRefusesAtOnce(t *testing.T) {
	ctx := context.Background()
	if res, err := algorithms.Wait(ctx, nil, "k", 1); !errors.Is(err, algorithms.ErrInvalidOption) || res.Allowed {
		t.Errorf("nil limiter: %+v, %v; want ErrInvalidOption", res, err)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	for _, alg := range algorithms.All() {
		l := waitLimiter(t, alg, algorithms.PerSecond(5))
		began := time.Now()
		for _, tc := range []struct {
			ctx  context.Context
			key  string
			cost int
			want error
		}{
			{ctx, "k", 0, algorithms.ErrInvalidCost},
			{ctx, "k", -1, algorithms.ErrInvalidCost},
			{ctx, "k", 6, algorithms.ErrCostExceedsLimit},
			{ctx, "", 1, algorithms.ErrInvalidKey},
			{ended, "k", 1, context.Canceled},
		} {
			res, err := algorithms.Wait(tc.ctx, l, tc.key, tc.cost)
			if !errors.Is(err, tc.want) || res.Allowed {
				t.Errorf("%s: key %q cost %d: %+v, %v; want %v", alg, tc.key, tc.cost, res, err, tc.want)
			}
		}
		if d := time.Since(began); d > 500*time.Millisecond {
			t.Errorf("%s: refusals took %s", alg, d)
		}
		// Peek tells what a request of cost 1 would leave: 4 of a whole 5.
		if p, err := l.Peek(ctx, "k"); err != nil || p.Remaining != 4 {
			t.Errorf("%s: after the refusals Peek says %+v, %v; want 4 remaining", alg, p, err)
		}
	}
}

// admittedBound is the most a limiter of lim and alg may have admitted by
// span after its key's first request: the buckets Burst + Rate × span,
// the windows Rate in each window begun (a window begins a Period or more
// after the one before).
func admittedBound(alg algorithms.Algorithm, lim algorithms.Limit, span time.Duration) int {
	if alg.CanReserve() {
		return lim.Capacity() + int((int64(lim.Rate)*int64(span)+int64(lim.Period)-1)/int64(lim.Period))
	}
	return lim.Rate * int(span/lim.Period+1)
}

// checkAdmitted fails t when the k-th admission (by the time its Wait
// returned, since began) passes admittedBound, and returns the most the
// admissions came to of the bound.
func checkAdmitted(t *testing.T, alg algorithms.Algorithm, lim algorithms.Limit, extra time.Duration, returned []time.Duration) (worst float64) {
	t.Helper()
	slices.Sort(returned)
	for k, at := range returned {
		bound := admittedBound(alg, lim, at+extra)
		if k+1 > bound {
			t.Errorf("%s: %d admitted by %s, bound %d", alg, k+1, at, bound)
		}
		worst = max(worst, float64(k+1)/float64(bound))
	}
	return worst
}

// Four goroutines Wait for 10 requests each on a limit of 10 per 100ms:
// every Wait returns an admission, and the k-th never came sooner than the
// limit allows (so 40 take at least 300ms).
func TestWaitPacesEveryAlgorithm(t *testing.T) {
	lim := algorithms.Limit{Rate: 10, Period: 100 * time.Millisecond}
	const goroutines, each = 4, 10
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			l := waitLimiter(t, alg, lim)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var mu sync.Mutex
			var returned []time.Duration
			began := time.Now()
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					for range each {
						res, err := algorithms.Wait(ctx, l, "upstream", 1)
						at := time.Since(began)
						if err != nil || !res.Allowed {
							t.Errorf("Wait: %+v, %v", res, err)
							return
						}
						mu.Lock()
						returned = append(returned, at)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(began)
			if len(returned) != goroutines*each {
				t.Fatalf("%d admitted, want %d", len(returned), goroutines*each)
			}
			if elapsed < 290*time.Millisecond {
				t.Errorf("40 requests at 10 per 100ms admitted in %s", elapsed)
			}
			worst := checkAdmitted(t, alg, lim, 0, returned)
			t.Logf("%d admitted in %s, at most %.0f%% of the bound", len(returned), elapsed.Round(time.Millisecond), 100*worst)
		})
	}
}

// A request whose turn is past the context's deadline fails at once with
// ErrWaitExceedsDeadline (also a context.DeadlineExceeded), the denial's
// RetryAfter beyond the deadline, and takes nothing: the request of cost 1
// that follows passes.
func TestWaitTurnPastDeadline(t *testing.T) {
	lim := algorithms.PerSecond(2)
	for _, alg := range algorithms.All() {
		l := waitLimiter(t, alg, lim)
		bg := context.Background()
		if res, err := l.Allow(bg, "k", 1); err != nil || !res.Allowed {
			t.Fatalf("%s: first request: %+v, %v", alg, res, err)
		}
		ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
		began := time.Now()
		res, err := algorithms.Wait(ctx, l, "k", 2)
		took, ctxErr := time.Since(began), ctx.Err()
		cancel()
		if !errors.Is(err, algorithms.ErrWaitExceedsDeadline) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: Wait: %v, want ErrWaitExceedsDeadline", alg, err)
		}
		if res.Allowed || res.RetryAfter <= 100*time.Millisecond || ctxErr != nil {
			t.Errorf("%s: %+v after %s (context: %v); want a denial past the deadline, before it", alg, res, took, ctxErr)
		}
		if res, err := l.Allow(bg, "k", 1); err != nil || !res.Allowed {
			t.Errorf("%s: the failed Wait took units: %+v, %v", alg, res, err)
		}
	}
}

// A reservation whose context ends during its wait is given back: the
// next request's turn is as if it had never been made.
func TestWaitCancelRefunds(t *testing.T) {
	lim := algorithms.PerSecond(2).WithBurst(1)
	for _, alg := range []algorithms.Algorithm{algorithms.TokenBucket, algorithms.LeakyBucket} {
		l := waitLimiter(t, alg, lim)
		bg := context.Background()
		if res, err := algorithms.Wait(bg, l, "k", 1); err != nil || !res.Allowed || res.Delay != 0 {
			t.Fatalf("%s: first Wait: %+v, %v", alg, res, err)
		}
		ctx, cancel := context.WithCancel(bg)
		time.AfterFunc(20*time.Millisecond, cancel)
		res, err := algorithms.Wait(ctx, l, "k", 1)
		if !errors.Is(err, context.Canceled) || res.Allowed {
			t.Errorf("%s: cancelled Wait: %+v, %v", alg, res, err)
		}
		p, err := l.Peek(bg, "k")
		// The first request's successor is due 500ms after it; had the
		// cancelled one kept its slot, the next would be 1s after it.
		if err != nil || p.RetryAfter >= 500*time.Millisecond {
			t.Errorf("%s: after the cancelled Wait, Peek says %+v, %v; want the turn within 500ms", alg, p, err)
		}
	}
}

// scripted is a Limiter (not a RateLimiter) that answers from a script,
// recording when it was asked.
type scripted struct {
	mu     sync.Mutex
	script []algorithms.Result
	err    error
	asked  []time.Time
}

func (s *scripted) Allow(context.Context, string, int) (algorithms.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, time.Now())
	if s.err != nil {
		return algorithms.Result{}, s.err
	}
	res := s.script[0]
	if len(s.script) > 1 {
		s.script = s.script[1:]
	}
	return res, nil
}

// Decisions of a failure mode: an admission nothing counted (FailOpen) or
// a local one is returned as an admission; a FailClosed denial is waited
// out for its RetryAfter, never asked again sooner, or fails at once when
// that is past the deadline; a denial without RetryAfter is asked again
// after a back-off, not in a busy loop; the limiter's error is returned.
func TestWaitFailureModes(t *testing.T) {
	bg := context.Background()
	open := algorithms.Result{Allowed: true, Decider: algorithms.DecidedFailOpen}
	s := &scripted{script: []algorithms.Result{open}}
	if res, err := algorithms.Wait(bg, s, "k", 1); err != nil || res != open || len(s.asked) != 1 {
		t.Errorf("FailOpen: %+v, %v after %d", res, err, len(s.asked))
	}

	closed := algorithms.Result{RetryAfter: 30 * time.Millisecond, Decider: algorithms.DecidedFailClosed}
	local := algorithms.Result{Allowed: true, Decider: algorithms.DecidedLocally}
	s = &scripted{script: []algorithms.Result{closed, closed, local}}
	if res, err := algorithms.Wait(bg, s, "k", 1); err != nil || res != local || len(s.asked) != 3 {
		t.Errorf("FailClosed, then local: %+v, %v after %d", res, err, len(s.asked))
	}
	for i := 1; i < len(s.asked); i++ {
		if d := s.asked[i].Sub(s.asked[i-1]); d < closed.RetryAfter {
			t.Errorf("asked again after %s, before RetryAfter %s", d, closed.RetryAfter)
		}
	}

	s = &scripted{script: []algorithms.Result{{RetryAfter: time.Second, Decider: algorithms.DecidedFailClosed}}}
	ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	_, err := algorithms.Wait(ctx, s, "k", 1)
	if !errors.Is(err, algorithms.ErrWaitExceedsDeadline) || ctx.Err() != nil {
		t.Errorf("FailClosed past the deadline: %v (context %v)", err, ctx.Err())
	}
	cancel()

	s = &scripted{script: []algorithms.Result{{}}}
	ctx, cancel = context.WithTimeout(bg, 100*time.Millisecond)
	_, err = algorithms.Wait(ctx, s, "k", 1)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || len(s.asked) < 2 || len(s.asked) > 101 {
		t.Errorf("denials without RetryAfter: %v after %d asks in 100ms", err, len(s.asked))
	}
	t.Logf("denials without RetryAfter: %d asks in 100ms", len(s.asked))

	down := errors.New("store down")
	s = &scripted{err: down}
	if res, err := algorithms.Wait(bg, s, "k", 1); !errors.Is(err, down) || res.Allowed {
		t.Errorf("store error: %+v, %v", res, err)
	}
}
