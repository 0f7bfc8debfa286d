package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/metrics"
)

// newOpsAPI serves the example with its built-in limits on the memory
// store and the operator handler behind token.
func newOpsAPI(t *testing.T, token string) *httptest.Server {
	t.Helper()
	cfg := options{jwtSecret: "test-secret", apiKeys: "free-1", proKeys: "pro-1", opsToken: token}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := newAPI(must(memstore.New()), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), m, reg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// The operator handler answers only to the token, and a client it resets
// passes at once.
func TestOperatorToken(t *testing.T) {
	const token = "s3cret-token"
	srv := newOpsAPI(t, token)
	bearer := map[string]string{"Authorization": "Bearer " + token}
	for _, h := range []map[string]string{
		nil,
		{"Authorization": "Bearer wrong"},
		{"Authorization": "Bearer " + token + "x"},
		{"Authorization": token},
	} {
		if got := do(t, srv, http.MethodGet, "/ops/policies", h).StatusCode; got != http.StatusUnauthorized {
			t.Errorf("GET /ops/policies with %v: %d, want 401", h, got)
		}
	}
	if got := do(t, srv, http.MethodGet, "/ops/policies", bearer).StatusCode; got != http.StatusOK {
		t.Fatalf("GET /ops/policies with the token: %d", got)
	}
	login := statuses(t, srv, http.MethodPost, "/login", nil, 6)
	if count(login, http.StatusOK) != 5 || login[5] != http.StatusTooManyRequests {
		t.Fatalf("login statuses %v, want 5 passes then 429", login)
	}
	reset := "/ops/policies/login?identity=ip:127.0.0.1"
	if got := do(t, srv, http.MethodPost, reset, nil).StatusCode; got != http.StatusUnauthorized {
		t.Fatalf("reset without the token: %d, want 401", got)
	}
	if got := do(t, srv, http.MethodPost, "/login", nil).StatusCode; got != http.StatusTooManyRequests {
		t.Fatalf("login after a refused reset: %d, want 429", got)
	}
	if got := do(t, srv, http.MethodPost, reset, bearer).StatusCode; got != http.StatusOK {
		t.Fatalf("reset with the token: %d", got)
	}
	if got := do(t, srv, http.MethodPost, "/login", nil).StatusCode; got != http.StatusOK {
		t.Fatalf("login after a reset: %d, want 200", got)
	}
}

// Without a token nothing is served under /ops/.
func TestOperatorOff(t *testing.T) {
	srv := newOpsAPI(t, "")
	if got := do(t, srv, http.MethodGet, "/ops/policies", nil).StatusCode; got != http.StatusNotFound {
		t.Errorf("GET /ops/policies without a token configured: %d, want 404", got)
	}
}

func TestOperatorTokenFlag(t *testing.T) {
	t.Setenv("OPERATOR_TOKEN", "from-env")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "from-env"},
		{[]string{"-operator-token", "from-flag"}, "from-flag"},
		{[]string{"-operator-token", ""}, ""}, // off, whatever the environment says
		{[]string{"-config", "redlimit.yaml"}, "from-env"},
		{[]string{"-config", "redlimit.yaml", "-operator-token", "from-flag"}, "from-flag"},
	} {
		got, err := parseFlags(c.args, io.Discard)
		if err != nil || got.opsToken != c.want {
			t.Errorf("%v: token %q (%v), want %q", c.args, got.opsToken, err, c.want)
		}
	}
}
