package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/metrics"
)

// modes are the two ways the example gets its limits: built in, and
// from the sample file.
var modes = []string{"builtin", "config"}

// newTestAPI serves the example on the memory store, with its limits
// built in or, for mode "config", from redlimit.yaml.
func newTestAPI(t *testing.T, mode string) *httptest.Server {
	t.Helper()
	cfg := options{jwtSecret: "test-secret", apiKeys: "free-1,free-2", proKeys: "pro-1, pro-2"}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var h http.Handler
	if mode == "config" {
		t.Setenv("REDIS_URL", "") // the sample's store: memory without it
		cfg.config = "redlimit.yaml"
		api, err := newConfiguredAPI(cfg, logger, m, reg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { api.Close(closeCtx()) })
		h = api.handler
	} else if h, err = newAPI(must(memstore.New()), cfg, logger, m, reg); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// forEachMode runs test on the example with its limits built in and
// from the sample file.
func forEachMode(t *testing.T, test func(t *testing.T, srv *httptest.Server)) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) { test(t, newTestAPI(t, mode)) })
	}
}

func do(t *testing.T, srv *httptest.Server, method, path string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// statuses sends n requests and returns their statuses.
func statuses(t *testing.T, srv *httptest.Server, method, path string, header map[string]string, n int) []int {
	var got []int
	for range n {
		got = append(got, do(t, srv, method, path, header).StatusCode)
	}
	return got
}

func count(codes []int, code int) int {
	n := 0
	for _, c := range codes {
		if c == code {
			n++
		}
	}
	return n
}

func TestRouteList(t *testing.T) {
	forEachMode(t, func(t *testing.T, srv *httptest.Server) {
		resp, err := srv.Client().Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Routes []struct {
				Method    string `json:"method"`
				Path      string `json:"path"`
				Algorithm string `json:"algorithm"`
				Limits    []struct {
					Rate          int     `json:"rate"`
					PeriodSeconds float64 `json:"period_seconds"`
				} `json:"limits"`
				Key string `json:"key"`
			} `json:"routes"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		algs, keys := map[string]bool{}, map[string]bool{}
		for _, r := range body.Routes {
			if r.Method == "" || !strings.HasPrefix(r.Path, "/") || len(r.Limits) == 0 {
				t.Errorf("incomplete route %+v", r)
			}
			for _, l := range r.Limits {
				if l.Rate <= 0 || l.PeriodSeconds <= 0 {
					t.Errorf("route %s: limit %+v", r.Path, l)
				}
			}
			algs[r.Algorithm], keys[r.Key] = true, true
		}
		for _, a := range algorithms.All() {
			if !algs[string(a)] {
				t.Errorf("no route shows %s", a)
			}
		}
		for _, k := range []string{"ip", "api_key", "jwt"} {
			if !keys[k] {
				t.Errorf("no route keyed by %s", k)
			}
		}
		if len(keys) != 3 {
			t.Errorf("key kinds %v, want only ip, api_key, jwt", keys)
		}
	})
}

func TestLoginIsStrict(t *testing.T) {
	forEachMode(t, func(t *testing.T, srv *httptest.Server) {
		got := statuses(t, srv, http.MethodPost, "/login", nil, 7)
		if count(got[:5], http.StatusOK) != 5 || count(got[5:], http.StatusTooManyRequests) != 2 {
			t.Fatalf("login statuses %v, want 5 × 200 then 429", got)
		}
		resp := do(t, srv, http.MethodPost, "/login", nil)
		retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil || retry < 1 || retry > 60 {
			t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
		}
		if resp.Header.Get("X-RateLimit-Limit") != "5" || resp.Header.Get("X-RateLimit-Remaining") != "0" {
			t.Fatalf("headers %v", resp.Header)
		}
		// Another route has its own counter.
		if got := do(t, srv, http.MethodGet, "/api/items", nil).StatusCode; got != http.StatusOK {
			t.Fatalf("/api/items after /login ran out: %d", got)
		}
	})
}

func TestMetrics(t *testing.T) {
	forEachMode(t, func(t *testing.T, srv *httptest.Server) {
		statuses(t, srv, http.MethodPost, "/login", nil, 7)
		resp, err := srv.Client().Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			`redlimit_requests_total{policy="login",result="allowed"} 5`,
			`redlimit_requests_total{policy="login",result="denied"} 2`,
			`redlimit_decision_duration_seconds_count{store="memory"} 7`,
		} {
			if !strings.Contains(string(body), want+"\n") {
				t.Errorf("/metrics lacks %s:\n%s", want, body)
			}
		}
	})
}

func TestJWTRoute(t *testing.T) {
	forEachMode(t, func(t *testing.T, srv *httptest.Server) {
		good, err := mintToken("test-secret", "alice", time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		forged, _ := mintToken("another-secret", "alice", time.Now(), time.Hour)
		expired, _ := mintToken("test-secret", "alice", time.Now().Add(-2*time.Hour), time.Hour)
		tests := []struct {
			name   string
			header map[string]string
			want   int
		}{
			{"no token", nil, http.StatusUnauthorized},
			{"forged", map[string]string{"Authorization": "Bearer " + forged}, http.StatusUnauthorized},
			{"expired", map[string]string{"Authorization": "Bearer " + expired}, http.StatusUnauthorized},
			{"valid", map[string]string{"Authorization": "Bearer " + good}, http.StatusOK},
		}
		for _, tt := range tests {
			if got := do(t, srv, http.MethodGet, "/api/me", tt.header).StatusCode; got != tt.want {
				t.Errorf("%s: status %d, want %d", tt.name, got, tt.want)
			}
		}
		// The leaky bucket holds 4: three more pass. Of three sent together
		// then, the one the bucket admits within 500ms waits its turn
		// (WithDelay) and passes; the others, a second or more away, are
		// refused.
		bearer := map[string]string{"Authorization": "Bearer " + good}
		if got := statuses(t, srv, http.MethodGet, "/api/me", bearer, 3); count(got, http.StatusOK) != 3 {
			t.Fatalf("statuses %v, want 3 × 200", got)
		}
		began := time.Now()
		codes := make([]int, 3)
		var wg sync.WaitGroup
		for i := range codes {
			wg.Go(func() { codes[i] = do(t, srv, http.MethodGet, "/api/me", bearer).StatusCode })
		}
		wg.Wait()
		if count(codes, http.StatusOK) != 1 || count(codes, http.StatusTooManyRequests) != 2 {
			t.Fatalf("statuses %v, want one delayed 200 and 2 × 429", codes)
		}
		if took := time.Since(began); took < 400*time.Millisecond {
			t.Fatalf("the delayed request passed after %s, not its turn", took)
		}
	})
}

func TestTiers(t *testing.T) {
	forEachMode(t, func(t *testing.T, srv *httptest.Server) {
		free := statuses(t, srv, http.MethodGet, "/api/plan", map[string]string{"X-API-Key": "free-1"}, 7)
		if count(free, http.StatusOK) != 5 {
			t.Fatalf("free plan statuses %v, want 5 passes", free)
		}
		pro := statuses(t, srv, http.MethodGet, "/api/plan", map[string]string{"X-API-Key": "pro-2"}, 20)
		if count(pro, http.StatusOK) != 20 {
			t.Fatalf("pro plan statuses %v, want all 20 to pass", pro)
		}
		if got := do(t, srv, http.MethodGet, "/api/plan", nil).StatusCode; got != http.StatusUnauthorized {
			t.Fatalf("no API key: %d, want 401", got)
		}
		// Made-up keys are refused rather than given fresh limits.
		for _, key := range []string{"made-up-1", "made-up-2"} {
			if got := do(t, srv, http.MethodGet, "/api/reports", map[string]string{"X-API-Key": key}).StatusCode; got != http.StatusUnauthorized {
				t.Fatalf("made-up key %q: %d, want 401", key, got)
			}
		}
	})
}

func TestCostAboveOne(t *testing.T) {
	forEachMode(t, func(t *testing.T, srv *httptest.Server) {
		got := statuses(t, srv, http.MethodPost, "/api/export", nil, 3)
		if got[0] != http.StatusOK || got[1] != http.StatusOK || got[2] != http.StatusTooManyRequests {
			t.Fatalf("export statuses %v, want two passes of cost 5 from a bucket of 10, then 429", got)
		}
	})
}

// Exports also have a concurrency limit, announced beside the rate limit.
func TestExportConcurrencyLimit(t *testing.T) {
	forEachMode(t, func(t *testing.T, srv *httptest.Server) {
		res := do(t, srv, http.MethodPost, "/api/export", nil)
		policies := strings.Join(res.Header.Values("RateLimit-Policy"), ", ")
		if res.StatusCode != http.StatusOK || !strings.Contains(policies, `"api-export"`) ||
			!strings.Contains(policies, `"api-export-in-flight";q=2;qu="concurrent-requests"`) {
			t.Fatalf("export: %d, RateLimit-Policy %q, want the rate and the concurrency limits", res.StatusCode, policies)
		}
	})
}

func TestMintToken(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), []string{"-jwt-secret", "s3", "-mint-token", "bob"}, &out); err != nil {
		t.Fatal(err)
	}
	if parts := strings.Split(strings.TrimSpace(out.String()), "."); len(parts) != 3 {
		t.Fatalf("minted %q, want a JWS compact token", out.String())
	}
}

// run serves until its context ends, then shuts down cleanly, with either
// store.
func TestRunServesAndShutsDown(t *testing.T) {
	addr, fileAddr := redistest.Standalone(t), redistest.Standalone(t)
	tests := []struct {
		name      string
		args      []string
		redisURL  string // REDIS_URL, which the sample file reads
		wantStore string
		stop      string // a Redis to stop once the limit is spent
	}{
		{"memory", nil, "", "memory", ""},
		{"redis", []string{"-redis", "redis://" + addr + "/0"}, "", "Redis at " + addr, addr},
		{"config", []string{"-config", "redlimit.yaml"}, "", "memory (this process only), policies from redlimit.yaml", ""},
		{"config with REDIS_URL", []string{"-config", "redlimit.yaml"}, "redis://" + fileAddr + "/0",
			"Redis at " + fileAddr + " db 0, policies from redlimit.yaml", fileAddr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("REDIS_URL", tt.redisURL)
			pr, pw := io.Pipe()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, tt.args...), pw); pw.Close() }()
			lines := bufio.NewScanner(pr)
			if !lines.Scan() {
				t.Fatal("no start-up line")
			}
			first := lines.Text()
			go io.Copy(io.Discard, pr)
			if !strings.Contains(first, tt.wantStore) {
				t.Errorf("start-up line %q does not name the store %q", first, tt.wantStore)
			}
			url := strings.TrimSuffix(strings.Fields(first[strings.Index(first, "http://"):])[0], ",")
			for i := range 61 {
				resp, err := http.Get(url + "/api/items")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				want := http.StatusOK
				if i == 60 {
					want = http.StatusTooManyRequests
				}
				if resp.StatusCode != want || resp.Header.Get("RateLimit-Policy") == "" {
					t.Fatalf("request %d to /api/items: %d %v, want %d", i+1, resp.StatusCode, resp.Header, want)
				}
			}
			if tt.stop != "" {
				// Redis goes away: the store decides in memory, with the
				// same limits, and the API stays up and limited.
				redistest.Stop(t, tt.stop)
				resp, err := http.Get(url + "/api/search")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || resp.Header.Get("X-RateLimit-Limit") != "5" {
					t.Fatalf("with Redis down: %d %v, want 200 from the fallback", resp.StatusCode, resp.Header)
				}
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("run after cancel: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("run did not shut down")
			}
		})
	}
}
