package middleware

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
)

// A handler that sets a cost far above the quota (a large export) is
// charged all that is left, so the requests after it of the same period
// are refused: exactly 1 of 20 sequential requests passes a quota of 10
// per hour, whatever the algorithm and the store, and nothing is logged.
func testCostAfterAboveQuota(t *testing.T, stores []outcomeStore) {
	for _, st := range stores {
		for _, alg := range algorithms.All() {
			t.Run(st.name+"/"+string(alg), func(t *testing.T) {
				t.Parallel()
				oneExportServed(t, st.new(alg, algorithms.PerHour(10)), WithTimeout(5*time.Second))
			})
		}
	}
}

// oneExportServed sends 20 requests through lim, each of which sets its
// cost to 1000 once served, with WithCostAfter and opts: exactly 1 is
// served and 19 refused, and nothing is logged about settling.
func oneExportServed(t *testing.T, lim algorithms.Limiter, opts ...Option) {
	t.Helper()
	logger, logs := newLogger()
	h := &slowHandler{status: http.StatusOK, setCost: 1, costTo: 1000}
	mw := mustNew(t, lim, append([]Option{WithKeyFunc(headerKey), WithCostAfter(), WithLogger(logger)}, opts...)...)(h)
	codes := map[int]int{}
	for range 20 {
		codes[get(mw, "/", "exporter").Code]++
	}
	if codes[http.StatusOK] != 1 || codes[http.StatusTooManyRequests] != 19 {
		t.Errorf("statuses %v; want 1 export served and 19 refused", codes)
	}
	if strings.Contains(logs.String(), "settling") {
		t.Errorf("settlement logged a failure:\n%s", logs)
	}
}

// plainLimiter hides every method of a limiter but Allow and Refund, as a
// limiter of the caller's own making may have no Charge.
type plainLimiter struct {
	algorithms.Limiter
	refunder
}

// A limiter without Charge is charged with Allow, the cost clamped to its
// quota so that it is never refused as too large: the same 1 of 20 passes,
// and nothing is logged.
func TestCostAfterAboveQuotaWithoutCharger(t *testing.T) {
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			l, err := algorithms.New(must(memstore.New()), alg, algorithms.PerHour(10))
			if err != nil {
				t.Fatal(err)
			}
			lim := plainLimiter{l, l}
			if _, ok := algorithms.Limiter(lim).(charger); ok {
				t.Fatal("the wrapper still has Charge; the test proves nothing")
			}
			oneExportServed(t, lim)
		})
	}
}

// failingCharger is a limiter whose Charge always fails, as a Redis store's
// does when Redis cannot answer.
type failingCharger struct {
	algorithms.RateLimiter
}

func (failingCharger) Charge(context.Context, string, int) (algorithms.Result, error) {
	return algorithms.Result{}, context.DeadlineExceeded
}

// A charge the limiter cannot make is logged, with its error.
func TestCostAfterChargeFailureLogged(t *testing.T) {
	l, err := algorithms.New(must(memstore.New()), algorithms.FixedWindow, algorithms.PerHour(10))
	if err != nil {
		t.Fatal(err)
	}
	logger, logs := newLogger()
	h := &slowHandler{status: http.StatusOK, setCost: 1, costTo: 5}
	mw := mustNew(t, failingCharger{l}, WithKeyFunc(headerKey), WithCostAfter(), WithLogger(logger))(h)
	if code := get(mw, "/", "k").Code; code != http.StatusOK {
		t.Fatalf("the request got %d", code)
	}
	if out := logs.String(); !strings.Contains(out, "settling") || !strings.Contains(out, "deadline exceeded") {
		t.Errorf("log %q; want the failed settlement and its error", out)
	}
}
