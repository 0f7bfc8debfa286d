package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// edit returns served with old replaced by new once, failing the test
// when old is not there.
func edit(t *testing.T, file, old, new string) string {
	t.Helper()
	if !strings.Contains(file, old) {
		t.Fatalf("file lacks %q", old)
	}
	return strings.Replace(file, old, new, 1)
}

func reload(t *testing.T, rt *Runtime, file string) error {
	t.Helper()
	return rt.Reload(mustParse(t, file))
}

func TestReloadKeepsCounts(t *testing.T) {
	rt, h := mount(t, served, buildOpts(quiet())...)
	const a = "192.0.2.1:1"
	if got := codes(h, 2, "GET", "/items", a); !equal(got, ints(200, 200)) {
		t.Fatalf("before: %v", got)
	}
	steps := []struct {
		name string
		file string
		n    int
		want []int
	}{
		// Another policy changes: items keeps its count (2 of 3 spent).
		{"other policy changed", edit(t, served, "rate: 20, period: 1m, burst: 10", "rate: 40, period: 1m, burst: 10"), 1, ints(200)},
		// Renamed, same limits: the count is kept by algorithm and limit.
		{"policy renamed", strings.ReplaceAll(edit(t, served, "  items:\n", "  catalog:\n"), "policy: items}", "policy: catalog}"), 1, ints(429)},
		// New limits: a new count.
		{"limits changed", edit(t, served, "limits: [{rate: 3, period: 1m}]", "limits: [{rate: 4, period: 1m}]"), 5, ints(200, 200, 200, 200, 429)},
		// Back to the old limits: their count was never lost.
		{"limits restored", served, 1, ints(429)},
		// Shadow on: nothing refused; off again: still spent.
		{"shadow on", edit(t, served, "policies:\n", "shadow: true\npolicies:\n"), 2, ints(200, 200)},
		{"shadow off", served, 1, ints(429)},
		// A new memory store is a fresh start.
		{"memory settings changed", "memory: {max_keys: 5000}\n" + served, 4, ints(200, 200, 200, 429)},
	}
	for _, s := range steps {
		if err := reload(t, rt, s.file); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := codes(h, s.n, "GET", "/items", a); !equal(got, s.want) {
			t.Fatalf("%s: %v, want %v", s.name, got, s.want)
		}
	}
}

func TestReloadRefused(t *testing.T) {
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	rt, h := mount(t, served, buildOpts(logger)...)
	const a = "192.0.2.1:1"
	codes(h, 2, "GET", "/items", a)
	dir := t.TempDir()
	path := filepath.Join(dir, "redlimit.yaml")
	bad := []struct {
		name string
		file string
		want string
	}{
		{"syntax", "policies: [\n", "redlimit.yaml: yaml:"},
		{"invalid limit", edit(t, served, "limits: [{rate: 3, period: 1m}]", "limits: [{rate: 3, period: 1 minute}]"), "redlimit.yaml:7: policies.items.limits[0].period"},
		{"new route", served + "  - {method: GET, path: /new, policy: items}\n", "route GET /new has no handler: new routes need code"},
		{"route removed", strings.Replace(served, "  - {method: GET, path: /me, policy: me}\n", "", 1), "route GET /me is mounted but not in the new file"},
		{"unregistered name", edit(t, served, "name: user", "name: nobody"), `redlimit.yaml:21: policies.me.key: name "nobody"`},
		{"unreachable file", "", "no such file"},
	}
	for _, b := range bad {
		p := path
		if b.file == "" {
			p = filepath.Join(dir, "missing.yaml")
		} else if err := os.WriteFile(path, []byte(b.file), 0o600); err != nil {
			t.Fatal(err)
		}
		err := rt.ReloadFile(p)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), b.want) {
			t.Fatalf("%s: %v, want %q", b.name, err, b.want)
		}
		if !strings.Contains(logs.String(), "configuration not reloaded") {
			t.Fatalf("%s: not logged: %s", b.name, logs)
		}
		// The running set is untouched: one request left for a.
		if rt.Config().Policies["items"].Limits[0].Rate != 3 {
			t.Fatalf("%s: the configuration in force changed", b.name)
		}
	}
	if got := codes(h, 2, "GET", "/items", a); !equal(got, ints(200, 429)) {
		t.Fatalf("after refused reloads: %v, want the old count kept", got)
	}
	// A good file then reloads.
	if err := os.WriteFile(path, []byte(served), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rt.ReloadFile(path); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "configuration reloaded") {
		t.Fatalf("reload not logged: %s", logs)
	}
}

// Requests keep flowing while the configuration is swapped back and forth:
// none fails, and every client gets exactly its limit, since the two sets
// differ only in policies these requests do not use.
func TestReloadUnderLoad(t *testing.T) {
	rt, h := mount(t, served, buildOpts(quiet())...)
	other := edit(t, served, "rate: 20, period: 1m, burst: 10", "rate: 30, period: 1m, burst: 10")
	other = edit(t, other, "    shadow: true\n", "    shadow: false\n")
	const clients, perClient, workers = 2000, 5, 8
	var bad atomic.Int64
	passed := make([]atomic.Int64, clients)
	stop := make(chan struct{})
	var reloads atomic.Int64
	var reloader sync.WaitGroup
	reloader.Add(1)
	go func() {
		defer reloader.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			file := served
			if i%2 == 0 {
				file = other
			}
			c, err := Parse([]byte(file), "served.yaml")
			if err == nil {
				err = rt.Reload(c)
			}
			if err != nil {
				t.Error(err)
				return
			}
			reloads.Add(1)
		}
	}()
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				// Every client's share at least, and more rounds (each
				// client already at its limit) until ten reloads have
				// happened during the requests, however fast they are.
				i := int(next.Add(1)) - 1
				if i >= clients*perClient && reloads.Load() >= 10 || i >= 20*clients*perClient {
					return
				}
				c := i % clients
				addr := fmt.Sprintf("192.0.%d.%d:1", 2+c/250, 1+c%250)
				switch code := send(h, http.MethodGet, "/items", addr).Code; code {
				case http.StatusOK:
					passed[c].Add(1)
				case http.StatusTooManyRequests:
				default:
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	reloader.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d requests got neither 200 nor 429 during reloads", bad.Load())
	}
	for c := range passed {
		if n := passed[c].Load(); n != 3 {
			t.Fatalf("client %d: %d passed, want exactly 3 across reloads", c, n)
		}
	}
	if n := reloads.Load(); n < 10 {
		t.Fatalf("only %d reloads happened during the requests", n)
	}
	t.Logf("%d requests, %d reloads", next.Load()-workers, reloads.Load()) // each worker took one index more
}
