// Package httpratecompare sets redlimit's httpratecounter beside
// go-chi/httprate-redis under the same concurrent load, in this module so
// that the library never depends on the peer.
package httpratecompare

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/httprate"
	httprateredis "github.com/go-chi/httprate-redis"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/httpratecounter"
	"github.com/redlimit/redlimit/internal/redistest"
)

// burst sends perGoroutine requests from each of goroutines goroutines per
// handler, all at once, and returns how many were admitted and how many
// got another answer than 200 or 429.
func burst(handlers []http.Handler, goroutines, perGoroutine int) (admitted, odd int64) {
	var a, o atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, h := range handlers {
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range perGoroutine {
					switch send(h, "GET", "/", "192.0.2.1:1").Code {
					case http.StatusOK:
						a.Add(1)
					case http.StatusTooManyRequests:
					default:
						o.Add(1)
					}
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	return a.Load(), o.Load()
}

// go-chi/httprate-redis v0.6.0 beside this Counter. On one server it has
// the same check-then-increment gap as the Counter without WithStrictLimit
// (httprate's interface, not either counter, leaves it), and strict mode
// closes it. On a Cluster it cannot work: it takes a single-node client,
// which Cluster nodes redirect, and its two windows' keys hash to
// different slots, so even a cluster client could not MGET them together;
// by default it then counts in each instance's memory, with no error
// shown, and four instances admit four times the limit.
func TestCompareHTTPRateRedis(t *testing.T) {
	const (
		instances, goroutines, perGoroutine = 4, 50, 2
		limit, rounds                       = 100, 10
		window                              = time.Hour
	)
	addr := redistest.Standalone(t)
	newClient := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	subjects := []struct {
		name    string
		maxOver int64
		counter func(client *redis.Client, round int) httprate.LimitCounter
	}{
		{"httprate-redis", instances - 1, func(client *redis.Client, round int) httprate.LimitCounter {
			return httprateredis.NewCounter(&httprateredis.Config{Client: client, PrefixKey: fmt.Sprintf("peer%d", round), FallbackDisabled: true})
		}},
		{"Counter", instances - 1, func(client *redis.Client, round int) httprate.LimitCounter {
			return mustNew(t, client, httpratecounter.WithPrefix(fmt.Sprintf("plain%d", round)))
		}},
		{"Counter, WithStrictLimit", 0, func(client *redis.Client, round int) httprate.LimitCounter {
			return mustNew(t, client, httpratecounter.WithPrefix(fmt.Sprintf("strict%d", round)), httpratecounter.WithStrictLimit())
		}},
	}
	for _, s := range subjects {
		t.Run("standalone/"+s.name, func(t *testing.T) {
			clients := make([]*redis.Client, instances)
			for i := range clients {
				clients[i] = newClient()
			}
			var overs []int64
			for round := range rounds {
				awayFromBoundary(window, 30*time.Second)
				handlers := make([]http.Handler, instances)
				for i, client := range clients {
					c := s.counter(client, round)
					opts := []httprate.Option{httprate.WithLimitCounter(c)}
					if ours, ok := c.(*httpratecounter.Counter); ok {
						opts = ours.Options()
					}
					handlers[i] = httprate.LimitBy(limit, window, httprate.Key("hot"), opts...)(ok)
				}
				admitted, odd := burst(handlers, goroutines, perGoroutine)
				if odd != 0 || admitted < limit || admitted > limit+s.maxOver {
					t.Fatalf("admitted %d (%d other answers); want %d to %d", admitted, odd, limit, limit+s.maxOver)
				}
				overs = append(overs, admitted-limit)
			}
			t.Logf("%d instances x %d goroutines, limit %d: admitted over the limit per round: %v", instances, goroutines, limit, overs)
		})
	}

	addrs := redistest.Cluster(t)
	t.Run("cluster", func(t *testing.T) {
		awayFromBoundary(window, 30*time.Second)
		var peer, ours []http.Handler
		var peerErrors atomic.Int64
		var firstErr atomic.Value
		for range instances {
			// httprate-redis takes a single-node client: the first node.
			node := redis.NewClient(&redis.Options{Addr: addrs[0]})
			t.Cleanup(func() { _ = node.Close() })
			pc := httprateredis.NewCounter(&httprateredis.Config{Client: node, PrefixKey: "peer", WindowLength: window,
				OnError: func(err error) {
					peerErrors.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}})
			peer = append(peer, httprate.LimitBy(limit, window, httprate.Key("hot"), httprate.WithLimitCounter(pc))(ok))

			cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
			t.Cleanup(func() { _ = cluster.Close() })
			ours = append(ours, httprate.LimitBy(limit, window, httprate.Key("hot"), mustNew(t, cluster, httpratecounter.WithPrefix("ours")).Options()...)(ok))
		}
		// One instance after another, so that no race muddles the count.
		count := func(handlers []http.Handler) (admitted int) {
			for _, h := range handlers {
				for range 2 * limit {
					if send(h, "GET", "/", "192.0.2.1:1").Code == http.StatusOK {
						admitted++
					}
				}
			}
			return admitted
		}
		peerAdmitted, oursAdmitted := count(peer), count(ours)
		t.Logf("cluster, %d instances one after another, limit %d: httprate-redis admitted %d (%d Redis errors such as %q, counted in memory instead), Counter %d",
			instances, limit, peerAdmitted, peerErrors.Load(), firstErr.Load(), oursAdmitted)
		if oursAdmitted != limit {
			t.Errorf("Counter on Cluster admitted %d; want %d", oursAdmitted, limit)
		}
		if peerAdmitted < instances*limit || peerErrors.Load() == 0 {
			t.Errorf("httprate-redis on Cluster admitted %d with %d errors; expected it to count per instance (at least %d) after errors",
				peerAdmitted, peerErrors.Load(), instances*limit)
		}
	})
}

// mustNew returns a Counter on client with a deadline a loaded machine
// reaches.
func mustNew(t *testing.T, client redis.UniversalClient, opts ...httpratecounter.Option) *httpratecounter.Counter {
	t.Helper()
	c, err := httpratecounter.New(client, append([]httpratecounter.Option{httpratecounter.WithTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// send serves one request from remote and returns the recorder.
func send(h http.Handler, method, path, remote string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = remote
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// ok is the handler behind the limiters.
var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

// awayFromBoundary waits, if need be, until the current window of length
// window has at least margin left, so that a test's requests all fall in
// one window of httprate's clock.
func awayFromBoundary(window, margin time.Duration) {
	now := time.Now()
	if left := now.Truncate(window).Add(window).Sub(now); left < margin {
		time.Sleep(left + time.Millisecond)
	}
}
