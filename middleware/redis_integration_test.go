package middleware

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/redisstore"
)

// redisLimiter returns a limiter on a go-redis client for addr. The client
// honours context deadlines, as the package documentation asks, and does
// not retry, so a test sees failures as they happen.
func redisLimiter(t testing.TB, addr string, alg algorithms.Algorithm, limits ...algorithms.Limit) algorithms.Limiter {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	return newLimiter(t, must(redisstore.New(client)), alg, limits...)
}

func TestRedisExactCount(t *testing.T) {
	// Two middleware instances with clients of their own, as two app
	// instances have, share one limit.
	addr := redistest.Standalone(t)
	const limit = 25
	next := &okHandler{}
	var hs []http.Handler
	for range 2 {
		lim := redisLimiter(t, addr, algorithms.SlidingWindowLog, algorithms.PerMinute(limit))
		hs = append(hs, mustNew(t, lim, WithTimeout(5*time.Second))(next))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := range 100 {
		wg.Go(func() {
			rec := from(hs[i%2], "/", "203.0.113.5:1")
			mu.Lock()
			codes[rec.Code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[http.StatusOK] != limit || codes[http.StatusTooManyRequests] != 100-limit || next.count() != limit {
		t.Errorf("statuses %v, handler ran %d times; want exactly %d passes", codes, next.count(), limit)
	}
}

func TestRedisDown(t *testing.T) {
	// The store decides what Redis cannot, by its failure mode; the
	// middleware answers by the Result's Decider.
	const timeout = 100 * time.Millisecond
	tests := []struct {
		name  string
		mode  redisstore.FailureMode
		codes []int // of the requests after Redis stops
		// headers reports whether the answers carry rate-limit headers: a
		// local decision does, an uncounted one does not.
		headers bool
	}{
		// The local twin starts from Redis's last answer (2 left of 3),
		// not from a full quota: 2 more, then denials.
		{"local by default", redisstore.FailLocal, []int{200, 200, 429, 429, 429}, true},
		{"fail open", redisstore.FailOpen, []int{200, 200, 200, 200, 200}, false},
		{"fail closed", redisstore.FailClosed, []int{503, 503, 503, 503, 503}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			logger, logs := newLogger()
			client := redis.NewClient(&redis.Options{Addr: srv.Addr})
			t.Cleanup(func() { _ = client.Close() })
			store := must(redisstore.New(client, redisstore.WithFailureMode(tt.mode), redisstore.WithLogger(logger)))
			lim := newLimiter(t, store, algorithms.TokenBucket, algorithms.PerMinute(3))
			h := mustNew(t, lim, WithTimeout(timeout), WithLogger(logger))(&okHandler{})

			if rec := from(h, "/", "203.0.113.6:1"); rec.Code != http.StatusOK || rec.Header().Get("X-RateLimit-Limit") != "3" {
				t.Fatalf("with Redis up: %d %v", rec.Code, rec.Header())
			}
			srv.Stop()
			for i, want := range tt.codes { // a pooled connection first, then fresh dials
				start := time.Now()
				rec := from(h, "/", "203.0.113.6:1")
				if took := time.Since(start); took > timeout+500*time.Millisecond {
					t.Errorf("request %d decided after %s, timeout %s", i, took, timeout)
				}
				if rec.Code != want {
					t.Fatalf("request %d: status %d, want %d; body %s", i, rec.Code, want, rec.Body)
				}
				if got := rec.Header().Get("X-RateLimit-Limit") != ""; got != tt.headers {
					t.Errorf("request %d: rate-limit headers %v, want %v", i, got, tt.headers)
				}
				if strings.Contains(rec.Body.String(), "127.0.0.1") || strings.Contains(rec.Body.String(), "refused") {
					t.Errorf("body leaks the Redis error: %s", rec.Body)
				}
			}
			if !strings.Contains(logs.String(), "Redis could not decide") || strings.Contains(logs.String(), "203.0.113.6") {
				t.Errorf("log lacks the failure or holds the client address: %q", logs)
			}
		})
	}
}

func TestRedisHung(t *testing.T) {
	// A server that accepts connections and never answers: only the
	// decision's deadline ends the wait, whatever the client's settings (a
	// default client would wait out its 3 s read timeout and retry).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = ln.Close()
		close(done)
		conns.Wait()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() {
				<-done
				_ = c.Close()
			})
		}
	}()

	const timeout = 100 * time.Millisecond
	for _, tt := range []struct {
		mode redisstore.FailureMode
		want int
	}{
		{redisstore.FailLocal, http.StatusOK},
		{redisstore.FailOpen, http.StatusOK},
		{redisstore.FailClosed, http.StatusServiceUnavailable},
	} {
		logger, _ := newLogger()
		client := redis.NewClient(&redis.Options{Addr: ln.Addr().String()})
		t.Cleanup(func() { _ = client.Close() })
		store := must(redisstore.New(client, redisstore.WithFailureMode(tt.mode), redisstore.WithLogger(logger)))
		lim := newLimiter(t, store, algorithms.FixedWindow, algorithms.PerMinute(10))
		h := mustNew(t, lim, WithTimeout(timeout), WithLogger(logger))(&okHandler{})
		start := time.Now()
		rec := from(h, "/", "203.0.113.7:1")
		if took := time.Since(start); took < timeout || took > timeout+500*time.Millisecond {
			t.Errorf("%s: decided after %s, timeout %s", tt.mode, took, timeout)
		}
		if rec.Code != tt.want {
			t.Errorf("%s: status %d, want %d", tt.mode, rec.Code, tt.want)
		}
	}
}

func TestRedisAPIKeyNeverStored(t *testing.T) {
	const raw = "sk_live_5f1d3c9a7b2e4d6f8a0c"
	srv := redistest.StartServer(t)
	logger, logs := newLogger()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = client.Close() })
	var hs []http.Handler
	for _, alg := range algorithms.All() {
		lim := newLimiter(t, must(redisstore.New(client, redisstore.WithLogger(logger))), alg, algorithms.PerMinute(3))
		hs = append(hs, mustNew(t, lim, WithKeyFunc(keyfunc.APIKey("X-API-Key")), WithLogger(logger))(&okHandler{}))
	}
	var responses []string
	for _, h := range hs {
		for range 5 {
			rec := from(h, "/", "203.0.113.8:1", "X-API-Key", raw)
			responses = append(responses, fmt.Sprint(rec.Header()), rec.Body.String())
		}
	}

	var keys []string
	iter := client.Scan(context.Background(), 0, "*", 1000).Iterator()
	for iter.Next(context.Background()) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(keys) < len(algorithms.All()) {
		t.Fatalf("SCAN found %d keys %q; want one per algorithm at least", len(keys), keys)
	}
	hash := keyfunc.HashAPIKey(raw)
	for _, k := range keys {
		if strings.Contains(k, raw) || strings.Contains(k, raw[8:]) {
			t.Errorf("Redis key %q holds the API key", k)
		}
		if !strings.Contains(k, hash) {
			t.Errorf("Redis key %q is not keyed by the API key's hash", k)
		}
	}

	// With Redis gone, the failure is logged: still without the key. (A key
	// Redis has not denied yet: a denial would be answered from the cache.)
	const raw2 = "sk_live_9e8d7c6b5a4f3e2d1c0b"
	srv.Stop()
	rec := from(hs[0], "/", "203.0.113.8:1", "X-API-Key", raw2)
	responses = append(responses, fmt.Sprint(rec.Header()), rec.Body.String())
	if !strings.Contains(logs.String(), "Redis could not decide") {
		t.Errorf("no failure logged: %q", logs)
	}
	for _, s := range append(responses, logs.String()) {
		if strings.Contains(s, raw) || strings.Contains(s, hash) || strings.Contains(s, raw2) || strings.Contains(s, keyfunc.HashAPIKey(raw2)) {
			t.Errorf("the API key or its hash leaked: %q", s)
		}
	}
}

func TestRedisRetryAfterHonoured(t *testing.T) {
	// Redis keeps its own clock, so this waits for real: a one-second
	// window keeps it short, and the algorithms, each on its own key,
	// wait side by side.
	addr := redistest.Standalone(t)
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			t.Parallel()
			lim := redisLimiter(t, addr, alg, algorithms.Limit{Rate: 2, Period: 500 * time.Millisecond})
			h := mustNew(t, lim, WithTimeout(time.Second))(&okHandler{})
			client := "203.0.113.9:1"
			var rec *httptest.ResponseRecorder
			for range 3 {
				rec = from(h, "/"+string(alg), client)
			}
			checkProblem(t, rec, http.StatusTooManyRequests)
			secs, err := strconv.Atoi(rec.Header().Get("Retry-After"))
			if err != nil || secs != 1 {
				t.Fatalf("Retry-After %q, want 1 for a half-second window", rec.Header().Get("Retry-After"))
			}
			time.Sleep(time.Duration(secs) * time.Second)
			if rec := from(h, "/"+string(alg), client); rec.Code != http.StatusOK {
				t.Errorf("after waiting Retry-After: %d", rec.Code)
			}
		})
	}
}
