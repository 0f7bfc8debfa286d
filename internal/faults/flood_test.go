package faults

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/middleware"
)

// A flood of concurrent requests from one client, over real HTTP, through
// chi and the middleware on a Redis store with a default client: exactly
// the limit passes, however many requests wait at once.
func TestHTTPFlood(t *testing.T) {
	const (
		rate     = 10
		requests = 3000
	)
	srv := redistest.StartServer(t)
	for _, k := range clientKinds {
		t.Run(k.name, func(t *testing.T) {
			lim := newLimiter(t, newClient(t, k, srv.Addr), rate, algorithms.WithPrefix(k.name))
			r := chi.NewRouter()
			r.With(middleware.New(lim)).Get("/search", func(http.ResponseWriter, *http.Request) {})
			ts := httptest.NewServer(r)
			t.Cleanup(ts.Close)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: requests}}
			t.Cleanup(client.CloseIdleConnections)

			codes := map[int]int{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range requests {
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
			if codes[http.StatusOK] != rate || codes[http.StatusTooManyRequests] != requests-rate {
				t.Errorf("statuses %v; want exactly %d × 200 and the rest 429", codes, rate)
			}
		})
	}
}
