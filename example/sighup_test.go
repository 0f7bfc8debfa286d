//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SIGHUP reloads the -config file: a new login limit takes effect, the
// operator handler sees it, and a broken file keeps it, with the reason
// logged.
func TestSIGHUPReloads(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	sample, err := os.ReadFile("redlimit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "limits.yaml")
	write := func(data string) {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(string(sample))

	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-config", path, "-operator-token", "t0k"}, pw)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatal("no start-up line")
	}
	first := lines.Text()
	url := strings.TrimSuffix(strings.Fields(first[strings.Index(first, "http://"):])[0], ",")
	var mu sync.Mutex
	var logged strings.Builder
	go func() {
		for lines.Scan() {
			mu.Lock()
			logged.WriteString(lines.Text() + "\n")
			mu.Unlock()
		}
	}()
	logs := func() string { mu.Lock(); defer mu.Unlock(); return logged.String() }

	login := func(n int) (passed int) {
		for range n {
			resp, err := http.Post(url+"/login", "text/plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				passed++
			}
		}
		return passed
	}
	loginRate := func() int {
		resp, err := http.Get(url + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Routes []route }
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		for _, r := range body.Routes {
			if r.Path == "/login" {
				return r.Limits[0].Rate
			}
		}
		t.Fatal("no /login in GET /")
		return 0
	}
	waitFor := func(what string, cond func() bool) {
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; log:\n%s", what, logs())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	if got := login(6); got != 5 {
		t.Fatalf("login: %d passed, want 5", got)
	}
	write(strings.Replace(string(sample), "limits: [{rate: 5, period: 1m}]\n    key: ip", "limits: [{rate: 7, period: 1m}]\n    key: ip", 1))
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor("the new login limit", func() bool { return loginRate() == 7 })
	if got := opsLimit(t, url, "login", "/login"); got != 7 {
		t.Fatalf("the operator handler peeks a limit of %d after the reload, want 7", got)
	}
	if got := login(8); got != 7 {
		t.Fatalf("login after reload: %d passed, want 7 (new limits, a new count)", got)
	}

	write("policies: [\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor("the refused reload in the log", func() bool { return strings.Contains(logs(), "configuration not reloaded") })
	if loginRate() != 7 || login(1) != 0 {
		t.Fatal("a broken file changed the limits in force")
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not shut down")
	}
}

// opsLimit peeks through the operator handler at the limit 127.0.0.1 has
// under policy on route.
func opsLimit(t *testing.T, url, policy, route string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/ops/policies/"+policy+"?identity=ip:127.0.0.1&route="+route, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer t0k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var peek struct{ Limit int }
	if err := json.NewDecoder(resp.Body).Decode(&peek); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("peek: %d, %v", resp.StatusCode, err)
	}
	return peek.Limit
}
