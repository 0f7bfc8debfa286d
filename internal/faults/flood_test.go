package faults

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/redisstore"
)

const (
	floodRate     = 10
	floodRequests = 3000
)

// A flood of concurrent requests from one client, over real HTTP, through
// chi and the middleware on a Redis store: exactly the limit passes,
// however many requests wait at once, as long as Redis decides them all.
// The timeout is long enough that no decision outlasts it even on a slow
// machine under -race: what happens when they do is
// TestHTTPFloodOutlastsDeadlines.
func TestHTTPFlood(t *testing.T) {
	floodEachClient(t, 10*time.Second, func(t *testing.T, codes map[int]int, lim *deciders) {
		if codes[http.StatusOK] != floodRate || codes[http.StatusTooManyRequests] != floodRequests-floodRate {
			t.Errorf("statuses %v; want exactly %d × 200 and the rest 429", codes, floodRate)
		}
		if n := lim.count(algorithms.DecidedLocally); n > 0 {
			t.Errorf("%d decisions made locally; want Redis to decide every one", n)
		}
	})
}

// The same flood with deadlines this process cannot keep (half a
// millisecond, shorter than a round trip under a flood): decisions wait
// in line past them and are made by the local twin. The limit still holds
// for the instance: what the twin admits is charged to Redis ahead of the
// key's line, so Redis counts it before deciding the requests still
// waiting. At worst (races between the two) Redis's limit and the twin's
// each pass once, never more.
func TestHTTPFloodOutlastsDeadlines(t *testing.T) {
	floodEachClient(t, 500*time.Microsecond, func(t *testing.T, codes map[int]int, lim *deciders) {
		if n := lim.count(algorithms.DecidedLocally); n == 0 {
			t.Fatalf("no decision was made locally (statuses %v): the flood did not outlast its deadlines", codes)
		}
		if codes[http.StatusOK] > 2*floodRate || codes[http.StatusOK]+codes[http.StatusTooManyRequests] != floodRequests {
			t.Errorf("statuses %v; want at most %d × 200 and the rest 429", codes, 2*floodRate)
		}
		if got := lim.count(algorithms.DecidedLocally) + lim.count(algorithms.DecidedByStore) + lim.count(algorithms.DecidedByCache); got != floodRequests {
			t.Errorf("%d decisions by Redis, its cache or the twin; want all %d", got, floodRequests)
		}
	})
}

// floodEachClient floods, for each kind of client, a limiter of floodRate
// on one real server whose decisions have timeout, and hands check the
// statuses and the count of decisions by decider.
func floodEachClient(t *testing.T, timeout time.Duration, check func(t *testing.T, codes map[int]int, lim *deciders)) {
	srv := redistest.StartServer(t)
	for _, k := range clientKinds {
		t.Run(k.name, func(t *testing.T) {
			lim := &deciders{Limiter: newLimiter(t, newClient(t, k, srv.Addr), floodRate,
				redisstore.WithPrefix(k.name), redisstore.WithTimeout(timeout))}
			check(t, flood(t, lim), lim)
		})
	}
}

// flood sends floodRequests concurrent requests through chi and the
// middleware on lim, and returns the count of each status.
func flood(t *testing.T, lim algorithms.Limiter) map[int]int {
	mw, err := middleware.New(lim)
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.With(mw).Get("/search", func(http.ResponseWriter, *http.Request) {})
	ts := httptest.NewServer(r)
	t.Cleanup(ts.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: floodRequests}}
	t.Cleanup(client.CloseIdleConnections)

	codes := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range floodRequests {
		wg.Go(func() {
			<-start
			code := 0
			if resp, err := client.Get(ts.URL + "/search"); err == nil {
				code = resp.StatusCode
				_ = resp.Body.Close()
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return codes
}

// deciders counts a limiter's decisions by what made them. It keeps the
// limiter's DecisionTimeout, so that the middleware leaves the deadline to
// the store as it does for the store's own limiters.
type deciders struct {
	algorithms.Limiter
	mu sync.Mutex
	by map[algorithms.Decider]int
}

func (d *deciders) Allow(ctx context.Context, key string, cost int) (algorithms.Result, error) {
	res, err := d.Limiter.Allow(ctx, key, cost)
	if err == nil {
		d.mu.Lock()
		if d.by == nil {
			d.by = map[algorithms.Decider]int{}
		}
		d.by[res.Decider]++
		d.mu.Unlock()
	}
	return res, err
}

func (d *deciders) DecisionTimeout() time.Duration {
	return d.Limiter.(algorithms.DecisionBounder).DecisionTimeout()
}

func (d *deciders) count(by algorithms.Decider) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.by[by]
}
