package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// proc is a server this program started, with its output in a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string        // the log file's path
	done chan struct{} // closed once the process has exited and been reaped
}

// startProc starts bin with args, its output going to logPath.
func startProc(name, logPath, bin string, args ...string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process by its PID: SIGTERM, then SIGKILL after 5 s.
func (p *proc) stop() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exitErr describes a process that ended before it was stopped, with the
// end of its log.
func (p *proc) exitErr() error {
	return fmt.Errorf("%s (pid %d) exited: %s; last lines of its log:\n%s",
		p.name, p.cmd.Process.Pid, p.cmd.ProcessState, tail(p.log, 15))
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// freePorts returns n distinct loopback ports that were free a moment ago.
// They are held open together so that none is handed out twice; a server
// started right after may still lose its port to another program, and then
// fails to start, which this program reports.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// cluster is the Redis server and the example instances under test.
type cluster struct {
	dir       string
	redis     *proc
	redisAddr string
	rdb       *redis.Client
	instances []*proc
	addrs     []string // the instances' host:port
}

// stop ends the instances, then Redis, and closes the Redis client.
func (c *cluster) stop() {
	if c.rdb != nil {
		c.rdb.Close()
	}
	var wg sync.WaitGroup
	for _, p := range c.instances {
		wg.Go(p.stop)
	}
	wg.Wait()
	if c.redis != nil {
		c.redis.stop()
	}
}

// moduleRoot returns the folder of the main module's go.mod.
func moduleRoot(ctx context.Context, goTool string) (string, error) {
	out, err := exec.CommandContext(ctx, goTool, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("%s env GOMOD: %w", goTool, err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the redlimit module: run from its folder")
	}
	return filepath.Dir(mod), nil
}

// buildExample builds the example (a module of its own, in example/) into
// dir and returns the binary's path.
func buildExample(ctx context.Context, goTool, dir string) (string, error) {
	root, err := moduleRoot(ctx, goTool)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "example")
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(root, "example")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./example: %w", err)
	}
	return bin, nil
}

// startRedis starts redis-server on a free loopback port, without
// persistence, and waits until it answers PING.
func (c *cluster) startRedis(ctx context.Context) error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server is not on PATH (Debian: apt-get install redis-server): %w", err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	c.redisAddr = "127.0.0.1:" + strconv.Itoa(ports[0])
	c.redis, err = startProc("redis-server", filepath.Join(c.dir, "redis.log"), bin,
		"--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", c.dir, "--daemonize", "no")
	if err != nil {
		return err
	}
	c.rdb = redis.NewClient(&redis.Options{Addr: c.redisAddr, MaxRetries: -1})
	for deadline := time.Now().Add(10 * time.Second); ; {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.rdb.Ping(pctx).Err()
		cancel()
		switch {
		case err == nil:
			return nil
		case c.redis.exited():
			return c.redis.exitErr()
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("redis-server on %s did not answer PING within 10 s: %w", c.redisAddr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// redisVersion returns the server's version from INFO server.
func (c *cluster) redisVersion(ctx context.Context) string {
	info, err := c.rdb.Info(ctx, "server").Result()
	if err != nil {
		return "?"
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "?"
}

// commandCalls returns the calls per command from INFO commandstats.
func (c *cluster) commandCalls(ctx context.Context) (map[string]int64, error) {
	info, err := c.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO commandstats: %w", err)
	}
	return parseCommandStats(info), nil
}

// startInstances starts n instances of the example binary on free loopback
// ports, all on the Redis server, and waits until each answers GET /.
func (c *cluster) startInstances(ctx context.Context, bin string, n int) error {
	ports, err := freePorts(n)
	if err != nil {
		return err
	}
	redisURL := "redis://" + c.redisAddr + "/0"
	for i, port := range ports {
		addr := "127.0.0.1:" + strconv.Itoa(port)
		p, err := startProc(fmt.Sprintf("example instance %d", i), filepath.Join(c.dir, fmt.Sprintf("example-%d.log", i)),
			bin, "-addr", addr, "-redis", redisURL, "-instances", strconv.Itoa(n))
		if err != nil {
			return err
		}
		c.instances = append(c.instances, p)
		c.addrs = append(c.addrs, addr)
	}
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	for i, addr := range c.addrs {
		for deadline := time.Now().Add(15 * time.Second); ; {
			status, err := get(ctx, probe, "http://"+addr+"/", nil)
			switch {
			case err == nil && status == http.StatusOK:
			case c.instances[i].exited():
				return c.instances[i].exitErr()
			case ctx.Err() != nil:
				return ctx.Err()
			case time.Now().After(deadline):
				return fmt.Errorf("%s on %s did not answer GET / with 200 within 15 s (last: %d, %v)", c.instances[i].name, addr, status, err)
			default:
				time.Sleep(50 * time.Millisecond)
				continue
			}
			break
		}
	}
	return nil
}

// get sends GET url and decodes a JSON body into v unless v is nil.
func get(ctx context.Context, client *http.Client, url string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if v != nil && resp.StatusCode == http.StatusOK {
		err = json.NewDecoder(resp.Body).Decode(v)
	} else {
		_, err = io.Copy(io.Discard, resp.Body)
	}
	return resp.StatusCode, err
}

// routeLimits is a route as the example's GET / lists it.
type routeLimits struct {
	Method    string `json:"method"`
	Path      string `json:"path"`
	Algorithm string `json:"algorithm"`
	Key       string `json:"key"`
	Limits    []struct {
		Rate          int     `json:"rate"`
		PeriodSeconds float64 `json:"period_seconds"`
	} `json:"limits"`
}

// limitsOf asks the first instance for its routes and returns the limits of
// GET path, which must be keyed by client IP and use an algorithm whose
// bound allowedBy knows.
func (c *cluster) limitsOf(ctx context.Context, path string) (string, []limitSpec, error) {
	var doc struct {
		Routes []routeLimits `json:"routes"`
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	if status, err := get(ctx, client, "http://"+c.addrs[0]+"/", &doc); err != nil || status != http.StatusOK {
		return "", nil, fmt.Errorf("GET / on %s: status %d, %v", c.addrs[0], status, err)
	}
	for _, r := range doc.Routes {
		if r.Method != http.MethodGet || r.Path != path {
			continue
		}
		if r.Key != "ip" {
			return "", nil, fmt.Errorf("GET %s is keyed by %q, not by client IP: the load test's clients could not tell themselves apart", path, r.Key)
		}
		if r.Algorithm != "fixed_window" && r.Algorithm != "sliding_window_counter" {
			return "", nil, fmt.Errorf("GET %s uses %s, for which this program knows no bound", path, r.Algorithm)
		}
		var specs []limitSpec
		for _, l := range r.Limits {
			specs = append(specs, limitSpec{Rate: l.Rate, Period: time.Duration(l.PeriodSeconds * float64(time.Second))})
		}
		if len(specs) == 0 {
			return "", nil, fmt.Errorf("GET %s lists no limits", path)
		}
		return r.Algorithm, specs, nil
	}
	return "", nil, fmt.Errorf("the example has no route GET %s", path)
}
