package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/redlimit/redlimit/bench/internal/redisproc"
	"github.com/redlimit/redlimit/bench/internal/subjects"
)

// wrkScript makes wrk send each request as from the next of n clients, by
// an X-Forwarded-For header that the middlewares believe because the
// connection comes from loopback. The addresses are those of
// harness.Addrs.
const wrkScript = `
local n = %d
local i = -1
request = function()
  i = (i + 1) %% n
  local ip = "10." .. (math.floor(i / 65536) %% 256) .. "." .. (math.floor(i / 256) %% 256) .. "." .. (i %% 256)
  return wrk.format(nil, nil, {["X-Forwarded-For"] = ip})
end
`

var (
	reqPerSecRE = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	non2xxRE    = regexp.MustCompile(`Non-2xx or 3xx responses:\s+([0-9]+)`)
	socketErrRE = regexp.MustCompile(`Socket errors:[^\n]*`)
)

// httpTable serves each subject from a real net/http server on loopback
// and drives it with wrk for cfg.httpDuration, count rounds interleaved,
// and reports the median requests/s and its ratio to the bare handler's.
func (r *runner) httpTable(ctx context.Context, subs []subjects.Subject, env subjects.Env, procs *procTable) (*table, []string, error) {
	wrk, err := exec.LookPath(r.cfg.wrk)
	if err != nil {
		return nil, nil, fmt.Errorf("wrk not found (install Debian's wrk package, or skip with -http=false): %w", err)
	}
	dir, err := os.MkdirTemp("", "redlimit-bench-wrk-")
	if err != nil {
		return nil, nil, fmt.Errorf("make a folder for the wrk script: %w", err)
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "clients.lua")
	if err := os.WriteFile(script, fmt.Appendf(nil, wrkScript, r.cfg.clients), 0o600); err != nil {
		return nil, nil, fmt.Errorf("write the wrk script: %w", err)
	}
	env.Forwarded = true
	rps := make([][]float64, len(subs))
	var notes []string
	for round := range r.cfg.count {
		for i, s := range subs {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			v, non2xx, err := r.httpOne(ctx, s, env, wrk, script, procs)
			if err != nil {
				return nil, nil, err
			}
			if non2xx > 0 {
				notes = append(notes, fmt.Sprintf("%s, round %d: %d responses were not 2xx", s.Name, round+1, non2xx))
			}
			rps[i] = append(rps[i], v)
			r.log("http round %d/%d %-48s %10.0f req/s", round+1, r.cfg.count, s.Name, v)
		}
	}
	bare := -1.0
	for i, s := range subs {
		if s.Kind == subjects.None {
			bare = median(rps[i])
		}
	}
	t := &table{header: []string{"server", "req/s", "÷ bare"}}
	for i, s := range subs {
		t.add(s.Name, thousands(median(rps[i])), ratio(median(rps[i]), bare))
	}
	return t, notes, nil
}

// httpOne serves one subject and runs wrk against it once.
func (r *runner) httpOne(ctx context.Context, s subjects.Subject, env subjects.Env, wrk, script string, procs *procTable) (rps float64, non2xx int64, err error) {
	if s.Kind == subjects.Redis {
		if err := r.redis.FlushAll(ctx); err != nil {
			return 0, 0, err
		}
	}
	inst, err := s.Build(env, subjects.Trivial)
	if err != nil {
		return 0, 0, fmt.Errorf("build %s: %w", s.Name, err)
	}
	defer inst.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, fmt.Errorf("listen on loopback: %w", err)
	}
	srv := &http.Server{Handler: inst.Handler, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		if serr := <-served; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = fmt.Errorf("serve %s: %w", s.Name, serr)
		}
	}()
	url := "http://" + ln.Addr().String() + "/"
	secs := max(int(r.cfg.httpDuration/time.Second), 1)
	cmd := exec.Command(wrk, "-t", strconv.Itoa(r.cfg.wrkThreads), "-c", strconv.Itoa(r.cfg.conns),
		"-d", strconv.Itoa(secs)+"s", "-s", script, url)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = redisproc.SysProcAttr()
	if err := procs.start(cmd); err != nil {
		return 0, 0, fmt.Errorf("start wrk: %w", err)
	}
	werr := procs.wait(cmd)
	if werr != nil {
		return 0, 0, fmt.Errorf("wrk against %s: %w; its output:\n%s", s.Name, werr, out.String())
	}
	m := reqPerSecRE.FindSubmatch(out.Bytes())
	if m == nil {
		return 0, 0, fmt.Errorf("no Requests/sec in wrk's output:\n%s", out.String())
	}
	rps, err = strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return 0, 0, fmt.Errorf("parse wrk's Requests/sec %q: %w", m[1], err)
	}
	if m := non2xxRE.FindSubmatch(out.Bytes()); m != nil {
		non2xx, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if m := socketErrRE.Find(out.Bytes()); m != nil {
		r.log("wrk against %s: %s", s.Name, m)
	}
	return rps, non2xx, nil
}
