// Command loadtest runs the example API as several instances sharing one
// Redis and checks, under load, that the limits hold across the instances:
// no client is admitted more often than its limit allows, and no request
// fails.
//
//	go run ./loadtest [-duration 15s] [-workers 128] [-identities 10000] [-per-client 8]
//	make loadtest [ARGS="-duration 10s"]
//
// It starts its own redis-server (from PATH, on a free loopback port, in a
// temporary folder, without persistence), builds the example once, starts
// -instances of it (3) on free loopback ports, all on that Redis, and waits
// until each answers GET /, whose route list gives the limits under test.
// Then it runs two scenarios, each for -duration, with -workers goroutines
// sending requests round-robin over the instances:
//
//  1. one-key flood: a single client sends GET /api/items (a fixed window of
//     60 per minute per IP) from every worker, as fast as the instances
//     answer;
//  2. many-key spread: -identities clients each send -per-client requests
//     to GET /api/search (a sliding window counter, 5 per second and 100
//     per minute per IP), one after another, each client starting at a
//     random moment of the run.
//
// The example keys these routes by the connection's remote address and
// trusts no proxy, so each client has its own loopback source address
// (127.0.0.0/8 is all on lo on Linux) instead of a forwarding header; one
// shared transport keeps each client's keep-alive connections apart (see
// clients).
//
// For each scenario it prints a plain-text table to stdout: requests and
// requests/s, 200s, 429s, other statuses, errors, latency p50 and p99, what
// each client was admitted against what its limits allow (see allowedBy for
// the bound and why it is exact here), and the Redis script calls
// (EVALSHA and EVAL, from INFO commandstats before and after) per HTTP
// request, followed by what the instances logged meanwhile (the Redis
// store logs its breaker's changes and Redis's errors). Progress goes to
// stderr.
//
// It exits with status 1 when a request got no response, a response was a
// 5xx or any status but 200 and 429, or a client was admitted more often
// than its limits allow; with status 2 when it could not set the test up,
// was interrupted or ran out of -timeout. Whatever happens, it stops, by
// PID, every process it started and removes its temporary folder.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// config is what the flags set.
type config struct {
	duration   time.Duration
	workers    int
	identities int
	perClient  int
	instances  int
	keepAlive  bool
	seed       uint64
	timeout    time.Duration
	goTool     string
}

func parseFlags(args []string, out io.Writer) (config, error) {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(out)
	var c config
	fs.DurationVar(&c.duration, "duration", 15*time.Second, "how long each scenario sends requests")
	fs.IntVar(&c.workers, "workers", 128, "concurrent requests at most")
	fs.IntVar(&c.identities, "identities", 10000, "clients of the many-key spread, each with its own source address")
	fs.IntVar(&c.perClient, "per-client", 8, "requests each client of the spread sends")
	fs.IntVar(&c.instances, "instances", 3, "instances of the example sharing one Redis")
	fs.BoolVar(&c.keepAlive, "keepalive", true, "keep connections alive between a client's requests (false: a connection per request)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the spread's schedule")
	fs.DurationVar(&c.timeout, "timeout", 4*time.Minute, "the whole run, build included, stops after this")
	fs.StringVar(&c.goTool, "go", "go", "the go command that builds the example")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.duration < time.Second || c.duration > 10*time.Minute:
		return c, fmt.Errorf("-duration %s: want 1s to 10m", c.duration)
	case c.workers < 1 || c.workers > 4096:
		return c, fmt.Errorf("-workers %d: want 1 to 4096", c.workers)
	case c.identities < 1 || c.identities > 1_000_000:
		return c, fmt.Errorf("-identities %d: want 1 to 1000000", c.identities)
	case c.perClient < 1 || c.perClient > 1000:
		return c, fmt.Errorf("-per-client %d: want 1 to 1000", c.perClient)
	case c.instances < 1 || c.instances > 32:
		return c, fmt.Errorf("-instances %d: want 1 to 32", c.instances)
	case c.timeout < 2*c.duration:
		return c, fmt.Errorf("-timeout %s is shorter than the two scenarios", c.timeout)
	}
	return c, nil
}

// errChecks reports a run that went through but found failures.
var errChecks = errors.New("checks failed")

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	err = run(ctx, cfg, os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, errChecks):
		os.Exit(1)
	default:
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(2)
	}
}

// run sets the servers up, runs both scenarios, prints their tables to out
// and tears everything down, whatever happened.
func run(ctx context.Context, cfg config, out, progress io.Writer) (err error) {
	logf := func(format string, args ...any) { fmt.Fprintf(progress, "loadtest: "+format+"\n", args...) }
	begin := time.Now()
	dir, err := os.MkdirTemp("", "redlimit-loadtest-")
	if err != nil {
		return err
	}
	c := &cluster{dir: dir}
	defer func() {
		c.stop()
		os.RemoveAll(dir)
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, errChecks) {
			if errors.Is(ctxErr, context.DeadlineExceeded) {
				err = fmt.Errorf("stopped after -timeout %s: %w", cfg.timeout, err)
			} else {
				err = fmt.Errorf("interrupted: %w", err)
			}
		}
		logf("stopped everything it started; %s in all", time.Since(begin).Round(100*time.Millisecond))
	}()

	lims, err := setUp(ctx, cfg, c, logf)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "redlimit load test: %d instances of the example on %s sharing redis-server %s; %d CPUs; %s per scenario, %d workers, keep-alive %t\n\n",
		cfg.instances, strings.Join(c.addrs, ", "), c.redisVersion(ctx), runtime.NumCPU(), cfg.duration, cfg.workers, cfg.keepAlive)
	failures, err := runScenarios(ctx, cfg, c, lims, out, logf)
	if err != nil {
		return err
	}
	for _, p := range c.instances {
		if p.exited() {
			failures++
			fmt.Fprintf(out, "FAIL: %v\n", p.exitErr())
		}
	}
	if failures > 0 {
		fmt.Fprintf(out, "FAIL: %d check(s) failed\n", failures)
		return errChecks
	}
	fmt.Fprintf(out, "PASS\n")
	return nil
}

// testedLimits are the algorithms and limits of the routes under test, as
// the example's GET / lists them.
type testedLimits struct {
	floodAlg, spreadAlg       string
	floodLimits, spreadLimits []limitSpec
}

// setUp builds the example, starts the redis-server and the instances,
// and reads the limits of the routes under test.
func setUp(ctx context.Context, cfg config, c *cluster, logf func(string, ...any)) (testedLimits, error) {
	var lims testedLimits
	logf("building the example")
	bin, err := buildExample(ctx, cfg.goTool, c.dir)
	if err != nil {
		return lims, err
	}
	if err := c.startRedis(ctx); err != nil {
		return lims, err
	}
	logf("redis-server %s (pid %d) on %s", c.redisVersion(ctx), c.redis.cmd.Process.Pid, c.redisAddr)
	if err := c.startInstances(ctx, bin, cfg.instances); err != nil {
		return lims, err
	}
	for i, p := range c.instances {
		logf("example instance %d (pid %d) on %s answers GET /", i, p.cmd.Process.Pid, c.addrs[i])
	}
	if lims.floodAlg, lims.floodLimits, err = c.limitsOf(ctx, "/api/items"); err != nil {
		return lims, err
	}
	if lims.spreadAlg, lims.spreadLimits, err = c.limitsOf(ctx, "/api/search"); err != nil {
		return lims, err
	}
	return lims, nil
}

// runScenarios runs the flood, then the spread, prints each one's table
// and the instances' logs meanwhile to out, and returns their failures.
func runScenarios(ctx context.Context, cfg config, c *cluster, lims testedLimits, out io.Writer, logf func(string, ...any)) (int, error) {
	s := &scenario{
		cl:        newClients(c.addrs, cfg.workers*cfg.instances, cfg.workers, cfg.keepAlive),
		cluster:   c,
		instances: cfg.instances,
		duration:  cfg.duration,
		workers:   cfg.workers,
	}
	var failures int
	logf("scenario 1: one-key flood for %s", cfg.duration)
	offs := c.logOffsets()
	r, err := s.flood(ctx, "/api/items", lims.floodAlg, lims.floodLimits)
	if err != nil {
		return failures, err
	}
	failures += emit(out, r, c.logSince(offs))
	logf("scenario 2: %d-key spread for %s", cfg.identities, cfg.duration)
	offs = c.logOffsets()
	r, err = s.spread(ctx, "/api/search", lims.spreadAlg, lims.spreadLimits, cfg.identities, cfg.perClient, cfg.seed)
	if err != nil {
		return failures, err
	}
	failures += emit(out, r, c.logSince(offs))
	return failures, nil
}

// emit prints r, then what the instances logged during its scenario, and
// returns its number of failures.
func emit(out io.Writer, r *report, logLines []string) int {
	var sb strings.Builder
	r.print(&sb)
	if len(logLines) == 0 {
		sb.WriteString("  instance logs: nothing\n")
	} else {
		sb.WriteString("  instance logs, by level and message (all instances):\n")
		for _, l := range logLines {
			sb.WriteString("    " + l + "\n")
		}
	}
	sb.WriteString("\n")
	io.WriteString(out, sb.String())
	return len(r.failures)
}
