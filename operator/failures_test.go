package operator

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/redisstore"
)

// The answers to what an operator can get wrong, and to Redis being
// down: each a problem document that quotes neither the identity nor
// anything internal, and a log line without the identity.
func TestFailureAnswers(t *testing.T) {
	server := redistest.StartServer(t)
	client := redis.NewClient(&redis.Options{Addr: server.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	store := must(redisstore.New(client, redisstore.WithTimeout(time.Second)))
	lim, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(2))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	h, err := New([]Policy{{Name: "api", Limiter: lim, Routes: []string{"/a", "/b"}}},
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	const secret = "sk_live_raw_api_key_value"
	ok := url.Values{"identity": {"ip:203.0.113.7"}, "route": {"/a"}}
	cases := []struct {
		name, method, path string
		query              url.Values
		want               int
		allow              string
	}{
		{"unknown policy", http.MethodGet, "/policies/nope", ok, 404, ""},
		{"unknown route", http.MethodGet, "/policies/api", url.Values{"identity": {"ip:1"}, "route": {"/c"}}, 404, ""},
		{"unknown reset route", http.MethodPost, "/policies/api", url.Values{"identity": {"ip:1"}, "route": {"/c"}}, 404, ""},
		{"unknown path", http.MethodGet, "/other", nil, 404, ""},
		{"no identity", http.MethodGet, "/policies/api", url.Values{"route": {"/a"}}, 400, ""},
		{"empty identity", http.MethodPost, "/policies/api", url.Values{"identity": {""}}, 400, ""},
		{"two identities", http.MethodPost, "/policies/api", url.Values{"identity": {"ip:1", "ip:2"}}, 400, ""},
		{"long identity", http.MethodGet, "/policies/api", url.Values{"identity": {strings.Repeat("x", maxIdentityLength+1)}, "route": {"/a"}}, 400, ""},
		{"control character", http.MethodGet, "/policies/api", url.Values{"identity": {"ip:1\n"}, "route": {"/a"}}, 400, ""},
		{"invalid UTF-8", http.MethodPost, "/policies/api", url.Values{"identity": {"ip:\xff"}}, 400, ""},
		{"raw API key", http.MethodPost, "/policies/api", url.Values{"identity": {"key:" + secret}}, 400, ""},
		{"peek without route", http.MethodGet, "/policies/api", url.Values{"identity": {"ip:1"}}, 400, ""},
		{"two routes", http.MethodGet, "/policies/api", url.Values{"identity": {"ip:1"}, "route": {"/a", "/b"}}, 400, ""},
		{"PUT a policy", http.MethodPut, "/policies/api", ok, 405, "GET, POST, DELETE"},
		{"POST the list", http.MethodPost, "/policies", nil, 405, "GET"},
	}
	check := func(t *testing.T, rec interface {
		Result() *http.Response
	}, body string, want int) {
		t.Helper()
		res := rec.Result()
		defer res.Body.Close()
		var p problemBody
		if err := json.Unmarshal([]byte(body), &p); err != nil || res.StatusCode != want || p.Status != want ||
			res.Header.Get("Content-Type") != "application/problem+json" || p.Detail == "" {
			t.Fatalf("%d %s %s, want a %d problem", res.StatusCode, res.Header.Get("Content-Type"), body, want)
		}
		for _, leak := range []string{secret, "203.0.113.7", server.Addr, "redis", "dial"} {
			if strings.Contains(strings.ToLower(body), strings.ToLower(leak)) {
				t.Errorf("the answer %s quotes %q", body, leak)
			}
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := operate(h, c.method, c.path, c.query)
			check(t, rec, rec.Body.String(), c.want)
			if got := rec.Header().Get("Allow"); got != c.allow {
				t.Errorf("Allow %q, want %q", got, c.allow)
			}
		})
	}
	// The valid requests work while Redis is up, and answer 503 once it
	// is stopped.
	apiKey := url.Values{"identity": {"key:" + keyfunc.HashAPIKey(secret)}}
	for _, down := range []bool{false, true} {
		if down {
			server.Stop()
		}
		for _, r := range []struct {
			method string
			query  url.Values
		}{{http.MethodGet, ok}, {http.MethodPost, ok}, {http.MethodDelete, apiKey}} {
			rec := operate(h, r.method, "/policies/api", r.query)
			if !down {
				if rec.Code != http.StatusOK {
					t.Fatalf("%s with Redis up: %d %s", r.method, rec.Code, rec.Body)
				}
				continue
			}
			check(t, rec, rec.Body.String(), http.StatusServiceUnavailable)
		}
	}
	if !strings.Contains(logs.String(), "policy=api") || strings.Contains(logs.String(), "203.0.113.7") ||
		strings.Contains(logs.String(), keyfunc.HashAPIKey(secret)) {
		t.Errorf("logs: %s", logs.String())
	}
}
