package middleware

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
)

// countingObserver is the comparison's observer: it counts the rare
// outcomes on shared counters and leaves the common ones alone.
type countingObserver struct{ rare atomic.Int64 }

func (o *countingObserver) Decision(d Decision) {
	if d.Outcome != OutcomeAllowed && d.Outcome != OutcomeDenied {
		o.rare.Add(1)
	}
}

func (o *countingObserver) BreakerChanged(string, bool) {}

// BenchmarkMiddlewareMemory mirrors the comparison's memory rows (bench's
// compare section): every algorithm on the memory store under a limit
// nearly all requests pass, keyed by client IP over many clients, with an
// observer, beside the bare handler. A row's overhead is its ns/op less
// the bare handler's; go-chi/httprate's row is the comparison's own (bench
// module), so that httprate is no dependency of this module.
func BenchmarkMiddlewareMemory(b *testing.B) {
	reqs := benchRequests()
	limit := algorithms.Limit{Rate: 1_000_000, Period: time.Minute}
	b.Run("bare", func(b *testing.B) {
		serveParallel(b, trivial, reqs, http.StatusNoContent)
	})
	for _, alg := range algorithms.All() {
		l := limit
		if alg == algorithms.SlidingWindowLog {
			l.Rate = min(l.Rate, algorithms.MaxSlidingLogRate)
		}
		b.Run(string(alg), func(b *testing.B) {
			lim := newLimiter(b, must(memstore.New()), alg, l)
			serveParallel(b, mustNew(b, lim, WithObserver(&countingObserver{}))(trivial), reqs, http.StatusNoContent)
		})
	}
	b.Run("fixed_window-no-observer", func(b *testing.B) {
		lim := newLimiter(b, must(memstore.New()), algorithms.FixedWindow, limit)
		serveParallel(b, mustNew(b, lim)(trivial), reqs, http.StatusNoContent)
	})
}
