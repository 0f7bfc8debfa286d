package httpratecounter

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/httprate"
)

// Four application instances (each its own client, Counter and httprate
// limiter) of fifty goroutines each send two requests at once on one key.
// httprate checks (Get) and counts (IncrementBy) in two calls and locks
// only within an instance, so without WithStrictLimit up to instances-1
// requests may pass beyond the limit, never more; with it, exactly the
// limit passes. Either way Redis holds exactly what was admitted.
func TestConcurrentInstances(t *testing.T) {
	const (
		instances, goroutines, perGoroutine = 4, 50, 2
		limit, rounds                       = 100, 10
		window                              = time.Hour
	)
	total := instances * goroutines * perGoroutine
	for _, b := range startBackends(t) {
		for _, strict := range []bool{false, true} {
			mode := map[bool]string{false: "plain", true: "strict"}[strict]
			t.Run(b.name+"/"+mode, func(t *testing.T) {
				clients := make([]func() *Counter, instances)
				for i := range clients {
					client := b.newClient(t)
					round := 0
					clients[i] = func() *Counter {
						opts := []Option{WithPrefix(fmt.Sprintf("conc-%s-%d", mode, round))}
						round++
						if strict {
							opts = append(opts, WithStrictLimit())
						}
						return mustNew(t, client, opts...)
					}
				}
				var overs []int64
				for range rounds {
					awayFromBoundary(window, 30*time.Second)
					counters := make([]*Counter, instances)
					handlers := make([]http.Handler, instances)
					for i := range counters {
						counters[i] = clients[i]()
						handlers[i] = limitBy(counters[i], limit, window, httprate.Key("hot"))(ok)
					}
					var admitted, refused atomic.Int64
					unexpected := make(chan response, total)
					start := make(chan struct{})
					var wg sync.WaitGroup
					for _, h := range handlers {
						for range goroutines {
							wg.Add(1)
							go func() {
								defer wg.Done()
								<-start
								for range perGoroutine {
									switch got := send(h, "GET", "/", "192.0.2.1:1"); got.code {
									case http.StatusOK:
										admitted.Add(1)
									case http.StatusTooManyRequests:
										refused.Add(1)
									default:
										unexpected <- got
									}
								}
							}()
						}
					}
					close(start)
					wg.Wait()
					close(unexpected)
					for got := range unexpected {
						t.Fatalf("unexpected answer %+v", got)
					}
					cur := time.Now().Truncate(window)
					// LimitBy joins key functions' results with a ':' after each.
					stored, _, err := counters[0].Get("hot:", cur, cur.Add(-window))
					if err != nil {
						t.Fatal(err)
					}
					a := admitted.Load()
					if a+refused.Load() != int64(total) || int64(stored) != a {
						t.Fatalf("admitted %d, refused %d of %d, stored %d: every admitted request, and only those, must be counted",
							a, refused.Load(), total, stored)
					}
					maxOver := int64(instances - 1)
					if strict {
						maxOver = 0
					}
					if a < limit || a > limit+maxOver {
						t.Fatalf("admitted %d; want %d to %d", a, limit, limit+maxOver)
					}
					overs = append(overs, a-limit)
				}
				t.Logf("%d instances x %d goroutines, limit %d: admitted over the limit per round: %v", instances, goroutines, limit, overs)
			})
		}
	}
}
