package httpratecounter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/httprate"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/keyfunc"
)

// Every error httprate can hand over gets one answer, through a real
// net/http server: the status, a problem+json body written once, no
// internals, no private marker on the wire, and no second WriteHeader.
func TestErrorAnswers(t *testing.T) {
	srv := redistest.StartServer(t)
	const window = time.Hour
	awayFromBoundary(window, 5*time.Second)
	newClient := func() redis.UniversalClient {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	byHeader := func(r *http.Request) (string, error) {
		if k := r.Header.Get("X-Client"); k != "" {
			return k, nil
		}
		return "", errors.New("no X-Client header from " + r.RemoteAddr)
	}

	// Stopped below, after the limiters that need it have counted.
	down := mustNew(t, newClient(), WithPrefix("down"))
	hDown := httprate.LimitBy(5, window, byHeader, down.Options()...)(ok)

	broken := mustNew(t, newClient(), WithPrefix("broken"))
	hBroken := httprate.LimitBy(0, window, byHeader, broken.Options()...)(ok)
	if err := broken.Err(); !errors.Is(err, ErrMisconfigured) {
		t.Fatalf("limit 0: Err = %v; want ErrMisconfigured", err)
	}

	// Limit 2 for the Counter; the request asks httprate for 5, which
	// httprate's own check allows and the strict script caps.
	strict := mustNew(t, newClient(), WithPrefix("strict"), WithStrictLimit())
	var mu sync.Mutex
	var custom []string
	mine := func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		custom = append(custom, r.URL.Path)
		mu.Unlock()
		http.Error(w, "slow down", http.StatusTooManyRequests)
	}
	hStrict := httprate.LimitBy(2, window, byHeader, append(strict.Options(),
		httprate.WithLimitHandler(strict.LimitHandler(mine)))...)(ok)
	askFive := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(httprate.WithRequestLimit(r.Context(), 5)))
		})
	}

	mux := http.NewServeMux()
	mux.Handle("/down", hDown)
	mux.Handle("/broken", hBroken)
	mux.Handle("/strict", askFive(hStrict))
	keyed := mustNew(t, newClient(), WithPrefix("keyed"))
	mux.Handle("/keyed", httprate.LimitBy(5, window, httprate.KeyFunc(keyfunc.APIKey("X-API-Key")), keyed.Options()...)(ok))
	var serverLog bytes.Buffer
	var logMu sync.Mutex
	ts := httptest.NewUnstartedServer(mux)
	ts.Config.ErrorLog = log.New(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return serverLog.Write(p)
	}), "", 0)
	ts.Start()
	t.Cleanup(ts.Close)

	get := func(path, client string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), "GET", ts.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if client != "" {
			req.Header.Set("X-Client", client)
		}
		res, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res, string(body)
	}

	// Before the failure: counted, admitted.
	if res, _ := get("/down", "alice"); res.StatusCode != 200 {
		t.Fatalf("Redis up: %d; want 200", res.StatusCode)
	}
	steps := []struct {
		name, path, client string
		status             int
		retryAfter         string
		body               string // a problem's detail, or a custom body
	}{
		{"strict: within the Counter's limit", "/strict", "bob", 200, "", ""},
		{"strict: within the Counter's limit", "/strict", "bob", 200, "", ""},
		{"strict: over the Counter's limit, under the request's", "/strict", "bob", 429, "3600", "slow down\n"},
		{"misconfigured", "/broken", "carol", 500, "", "The rate limiter is misconfigured."},
		{"no key", "/down", "", 400, "", "The request does not identify its client as the rate limiter requires."},
		{"no API key", "/keyed", "", 401, "", "The request lacks a valid credential, which identifies its client to the rate limiter."},
		{"Redis down", "/down", "alice", 503, "1", "The rate limiter cannot decide at the moment; retry shortly."},
	}
	for i, s := range steps {
		if s.name == "Redis down" {
			srv.Stop()
		}
		res, body := get(s.path, s.client)
		if res.StatusCode != s.status || res.Header.Get("Retry-After") != s.retryAfter {
			t.Errorf("%d %s: %d with Retry-After %q; want %d with %q", i+1, s.name, res.StatusCode, res.Header.Get("Retry-After"), s.status, s.retryAfter)
		}
		if (res.Header.Get("WWW-Authenticate") == "APIKey") != (s.status == 401) {
			t.Errorf("%d %s: WWW-Authenticate %q", i+1, s.name, res.Header.Get("WWW-Authenticate"))
		}
		if res.Header.Get(answeredHeader) != "" {
			t.Errorf("%d %s: the private marker reached the client", i+1, s.name)
		}
		if strings.Contains(body, "127.0.0.1") || strings.Contains(body, "X-Client") || strings.Contains(body, "httpratecounter") {
			t.Errorf("%d %s: body shows internals: %q", i+1, s.name, body)
		}
		switch {
		case s.status == 200:
		case res.Header.Get("Content-Type") == "application/problem+json":
			var p struct {
				Status int
				Detail string
			}
			if err := json.Unmarshal([]byte(body), &p); err != nil || p.Status != s.status || p.Detail != s.body {
				t.Errorf("%d %s: body %q (%v); want one problem of status %d: %q", i+1, s.name, body, err, s.status, s.body)
			}
		case body != s.body:
			t.Errorf("%d %s: body %q; want %q", i+1, s.name, body, s.body)
		}
	}
	if fmt.Sprint(custom) != "[/strict]" {
		t.Errorf("custom limit handler called for %v; want the strict refusal only", custom)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if strings.Contains(serverLog.String(), "superfluous") {
		t.Errorf("a second answer was attempted: %s", serverLog.String())
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// ErrorHandler on its own, for each kind of error, and LimitHandler after
// it.
func TestErrorHandlerTable(t *testing.T) {
	c := mustNew(t, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	c.Config(10, 90*time.Second)
	cases := []struct {
		err        error
		status     int // of ErrorHandler, or else of LimitHandler(nil) after it
		retryAfter string
	}{
		{ErrLimitExceeded, 429, "90"},
		{fmt.Errorf("%w: get: dial tcp 127.0.0.1:1: refused", ErrUnavailable), 503, "1"},
		{fmt.Errorf("%w: limit 0", ErrMisconfigured), 500, ""},
		{errors.New("key function: no header"), 400, ""},
		{fmt.Errorf("k: %w", keyfunc.ErrNoAPIKey), 401, ""},
		{fmt.Errorf("k: %w", keyfunc.ErrInvalidToken), 401, ""},
	}
	for _, tc := range cases {
		t.Run(tc.err.Error(), func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest("GET", "/", nil)
			c.ErrorHandler(w, r, tc.err)
			c.LimitHandler(nil)(w, r)
			res := w.Result()
			if res.StatusCode != tc.status || res.Header.Get("Retry-After") != tc.retryAfter {
				t.Errorf("%d, Retry-After %q; want %d, %q", res.StatusCode, res.Header.Get("Retry-After"), tc.status, tc.retryAfter)
			}
			if n := strings.Count(w.Body.String(), `"status":`); n != 1 || strings.Contains(w.Body.String(), "127.0.0.1") {
				t.Errorf("body %q: want one problem without internals", w.Body.String())
			}
			if wantChallenge := tc.status == 401; (res.Header.Get("WWW-Authenticate") != "") != wantChallenge {
				t.Errorf("WWW-Authenticate %q on a %d", res.Header.Get("WWW-Authenticate"), tc.status)
			}
		})
	}
	if got := wholeSeconds(1500 * time.Millisecond); got != 2 {
		t.Errorf("wholeSeconds(1.5s) = %d; want 2", got)
	}
	if got := wholeSeconds(10 * time.Millisecond); got != 1 {
		t.Errorf("wholeSeconds(10ms) = %d; want 1", got)
	}
}
