package middleware

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
)

// benchClients is how many client addresses the benchmarks spread over.
const benchClients = 10_000

// benchRequests returns one request per client, each from its own address.
func benchRequests() []*http.Request {
	reqs := make([]*http.Request, benchClients)
	for i := range reqs {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ":40000"
		reqs[i] = r
	}
	return reqs
}

// trivial is the handler under the middleware: as little as a handler does.
var trivial = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusNoContent)
})

// serveParallel runs h over the requests from all goroutines, each starting
// at its own place in the list.
func serveParallel(b *testing.B, h http.Handler, reqs []*http.Request, want int) {
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(len(reqs))
		for pb.Next() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, reqs[i])
			if rec.Code != want {
				b.Errorf("status %d, want %d", rec.Code, want)
				return
			}
			if i++; i == len(reqs) {
				i = 0
			}
		}
	})
}

// huge is a quota no benchmark exhausts, so every request passes.
var huge = algorithms.PerSecond(1_000_000)

func BenchmarkMiddleware(b *testing.B) {
	reqs := benchRequests()
	b.Run("bare", func(b *testing.B) {
		serveParallel(b, trivial, reqs, http.StatusNoContent)
	})
	b.Run("bare+headers", func(b *testing.B) {
		// What five rate-limit headers cost a recorder that copies them,
		// with no work to make them: a floor for any middleware that sends
		// them.
		vals := [][]string{{"100"}, {"99"}, {"1767225600"}, {`"default";q=100;w=60`}, {`"default";r=99;t=60`}}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hd := w.Header()
			hd[hdrLimit], hd[hdrRemaining], hd[hdrReset], hd[hdrPolicy], hd[hdrRateLimit] = vals[0], vals[1], vals[2], vals[3], vals[4]
			trivial(w, r)
		})
		serveParallel(b, h, reqs, http.StatusNoContent)
	})
	b.Run("memory", func(b *testing.B) {
		lim := newLimiter(b, must(memstore.New()), algorithms.FixedWindow, huge)
		serveParallel(b, mustNew(b, lim)(trivial), reqs, http.StatusNoContent)
	})
	b.Run("memory-allow", func(b *testing.B) {
		// The limiter alone, on the keys the middleware derives.
		lim := newLimiter(b, must(memstore.New()), algorithms.FixedWindow, huge)
		allowParallel(b, lim, benchKeys(b, reqs))
	})
	b.Run("memory-denied", func(b *testing.B) {
		lim := newLimiter(b, must(memstore.New()), algorithms.FixedWindow, algorithms.PerHour(1))
		h := mustNew(b, lim)(trivial)
		for _, r := range reqs {
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
		serveParallel(b, h, reqs, http.StatusTooManyRequests)
	})
	b.Run("memory-token-bucket", func(b *testing.B) {
		lim := newLimiter(b, must(memstore.New()), algorithms.TokenBucket, huge)
		serveParallel(b, mustNew(b, lim)(trivial), reqs, http.StatusNoContent)
	})
}

func BenchmarkRedis(b *testing.B) {
	addr := redistest.Standalone(b)
	reqs := benchRequests()
	lim := redisLimiter(b, addr, algorithms.FixedWindow, huge)
	b.Run("middleware", func(b *testing.B) {
		serveParallel(b, mustNew(b, lim, WithTimeout(DefaultTimeout*10))(trivial), reqs, http.StatusNoContent)
	})
	b.Run("allow", func(b *testing.B) {
		allowParallel(b, lim, benchKeys(b, reqs))
	})
	b.Run("allow-with-timeout", func(b *testing.B) {
		// Allow bounded by context.WithTimeout, as a caller without the
		// middleware would bound it.
		keys := benchKeys(b, reqs)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(len(keys))
			for pb.Next() {
				ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout*10)
				_, err := lim.Allow(ctx, keys[i], 1)
				cancel()
				if err != nil {
					b.Error(err)
					return
				}
				if i++; i == len(keys) {
					i = 0
				}
			}
		})
	})
}

// benchKeys returns the keys the default key function gives the requests.
func benchKeys(b *testing.B, reqs []*http.Request) []string {
	kf := keyfunc.IP()
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		k, err := kf(r)
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = k
	}
	return keys
}

// allowParallel runs lim.Allow over the keys from all goroutines.
func allowParallel(b *testing.B, lim algorithms.Limiter, keys []string) {
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(len(keys))
		for pb.Next() {
			if _, err := lim.Allow(context.Background(), keys[i], 1); err != nil {
				b.Error(err)
				return
			}
			if i++; i == len(keys) {
				i = 0
			}
		}
	})
}
