package httpratecounter

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
)

// backend is a real Redis deployment for a test: it hands out new clients,
// one per simulated application instance.
type backend struct {
	name      string
	newClient func(t *testing.T) redis.UniversalClient
}

// startBackends starts a standalone server and a three-master Cluster.
func startBackends(t *testing.T) []backend {
	t.Helper()
	addr := redistest.Standalone(t)
	addrs := redistest.Cluster(t)
	return []backend{
		{"standalone", func(t *testing.T) redis.UniversalClient {
			c := redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
		{"cluster", func(t *testing.T) redis.UniversalClient {
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
	}
}

// testTimeout replaces DefaultTimeout in tests that are not about
// timeouts: on a loaded machine under the race detector a call, a fresh
// Cluster client's first above all, may take longer than 100ms.
const testTimeout = 5 * time.Second

// mustNew is New that fails the test on an error, with testTimeout unless
// opts set another.
func mustNew(t *testing.T, client redis.UniversalClient, opts ...Option) *Counter {
	t.Helper()
	c, err := New(client, append([]Option{WithTimeout(testTimeout)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// awayFromBoundary waits, if need be, until the current window of length
// window has at least margin left, so that a test's requests all fall in
// one window of httprate's clock.
func awayFromBoundary(window, margin time.Duration) {
	now := time.Now()
	if left := now.Truncate(window).Add(window).Sub(now); left < margin {
		time.Sleep(left + time.Millisecond)
	}
}

// response is what a test reads of one answer.
type response struct {
	code                        int
	limit, remaining, reset, ra string
	increment                   string
	body                        string
}

// send serves one request from remote to h and returns its answer.
func send(h http.Handler, method, path, remote string, header ...string) response {
	return sendCtx(context.Background(), h, method, path, remote, header...)
}

// sendCtx is send with the request's context.
func sendCtx(ctx context.Context, h http.Handler, method, path, remote string, header ...string) response {
	r := httptest.NewRequestWithContext(ctx, method, path, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	hd := w.Result().Header
	return response{
		code: w.Code, limit: hd.Get("X-RateLimit-Limit"), remaining: hd.Get("X-RateLimit-Remaining"),
		reset: hd.Get("X-RateLimit-Reset"), ra: hd.Get("Retry-After"), increment: hd.Get("X-RateLimit-Increment"),
		body: w.Body.String(),
	}
}

// ok is the handler behind the limiters.
var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
