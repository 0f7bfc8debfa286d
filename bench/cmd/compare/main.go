// Command compare runs redlimit's middleware and its peers' behind the same
// trivial handler, at the same limit, keyed by client IP over many clients,
// against one redis-server that it starts and stops itself, and prints
// markdown tables: a Go benchmark of each at several concurrencies, the
// same when most requests are denied, redlimit's Redis store against the
// number of identities, Redis memory per identity, and a real net/http
// server under wrk. Progress goes to standard error; run with -h for the
// flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/bench/internal/redisproc"
	"github.com/redlimit/redlimit/bench/internal/subjects"
)

// config is the command line.
type config struct {
	benchtime    time.Duration
	count        int
	gs           []int
	clients      int
	tenants      int
	rate         int
	period       time.Duration
	pool         int
	sections     map[string]bool
	only         *regexp.Regexp
	sweepAlgs    []algorithms.Algorithm
	sweepSizes   []int
	memoryKeys   int
	httpDuration time.Duration
	conns        int
	wrkThreads   int
	wrk          string
	csv          string
}

var allSections = []string{"compare", "tenants", "denied", "sweep", "memory", "http", "allow"}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	var cfg config
	var gs, sections, only, sweepAlgs, sweepSizes string
	fs.DurationVar(&cfg.benchtime, "benchtime", 500*time.Millisecond, "time of each benchmark run (after the first round, a fixed count of iterations of about this time)")
	fs.IntVar(&cfg.count, "count", 3, "rounds of every measurement; tables show medians")
	fs.StringVar(&gs, "g", "2,50,256", "concurrent goroutines; the middle one is the reference for req/s, allocs and Redis CPU")
	fs.IntVar(&cfg.clients, "clients", 10_000, "client IPs the requests are spread over")
	fs.IntVar(&cfg.tenants, "tenants", 100, "keys of the per-tenant section, each busy and below its limit (client IPs too: every middleware keys by client IP)")
	fs.IntVar(&cfg.rate, "rate", 1_000_000, "limit per period of every middleware, high enough that nearly all requests pass")
	fs.DurationVar(&cfg.period, "period", time.Minute, "the limit's period")
	fs.IntVar(&cfg.pool, "pool", 50, "go-redis pool size of every Redis-backed middleware")
	fs.StringVar(&sections, "sections", strings.Join(allSections, ","), "sections to run, of "+strings.Join(allSections, ","))
	fs.StringVar(&only, "only", "", "run only the middlewares whose name matches this regular expression (the bare handler always runs)")
	fs.StringVar(&sweepAlgs, "sweep-algs", string(algorithms.SlidingWindowCounter), "algorithms of the identities sweep, comma-separated, or \"all\"")
	fs.StringVar(&sweepSizes, "sweep-sizes", "1000,10000,100000,1000000", "identity counts of the sweep")
	fs.IntVar(&cfg.memoryKeys, "memory-keys", 100_000, "distinct identities for the Redis memory table")
	fs.DurationVar(&cfg.httpDuration, "http-duration", 3*time.Second, "wrk's duration per run (whole seconds)")
	fs.IntVar(&cfg.conns, "conns", 50, "wrk's connections")
	fs.IntVar(&cfg.wrkThreads, "wrk-threads", 1, "wrk's threads")
	fs.StringVar(&cfg.wrk, "wrk", "wrk", "the wrk program")
	fs.StringVar(&cfg.csv, "csv", "", "also write the measurements of the compare and denied tables to this file as CSV (format in csv.go; rewritten after each of those sections; empty: none)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	var err error
	if cfg.gs, err = parseInts(gs); err != nil {
		return cfg, fmt.Errorf("-g: %w", err)
	}
	if cfg.sweepSizes, err = parseInts(sweepSizes); err != nil {
		return cfg, fmt.Errorf("-sweep-sizes: %w", err)
	}
	if cfg.only, err = regexp.Compile(only); err != nil {
		return cfg, fmt.Errorf("-only: %w", err)
	}
	cfg.sections = map[string]bool{}
	for s := range strings.SplitSeq(sections, ",") {
		if s = strings.TrimSpace(s); s != "" {
			if !slices.Contains(allSections, s) {
				return cfg, fmt.Errorf("-sections: no section %q (the sections: %s)", s, strings.Join(allSections, ","))
			}
			cfg.sections[s] = true
		}
	}
	if sweepAlgs == "all" {
		cfg.sweepAlgs = algorithms.All()
	} else {
		for a := range strings.SplitSeq(sweepAlgs, ",") {
			cfg.sweepAlgs = append(cfg.sweepAlgs, algorithms.Algorithm(strings.TrimSpace(a)))
		}
	}
	if err := checkCSVPath(cfg.csv); err != nil {
		return cfg, err
	}
	if cfg.count < 1 || cfg.clients < 1 || cfg.tenants < 1 || cfg.rate < 1 || cfg.pool < 1 || cfg.benchtime <= 0 || cfg.period <= 0 {
		return cfg, errors.New("-count, -clients, -tenants, -rate, -pool, -benchtime and -period must be positive")
	}
	return cfg, nil
}

func main() {
	testing.Init() // registers -test.benchtime, which testing.Benchmark reads
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	if err := run(cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// run starts the redis-server, stops it (and any wrk) by PID on return or
// on SIGINT/SIGTERM, and prints the sections' tables to out.
func run(cfg config, out io.Writer) error {
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
	srv, err := redisproc.Start()
	if err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	defer srv.Stop()
	procs := &procTable{running: map[*exec.Cmd]struct{}{}}
	defer procs.killAll()
	ctx, cancel := stopOnSignal(srv, procs, logf)
	defer cancel()

	hz, assumed := redisproc.ClockTicks()
	version, err := srv.Version(ctx)
	if err != nil {
		return err
	}
	started := time.Now()
	s := &session{
		runner: &runner{cfg: cfg, redis: srv, hz: hz, log: logf, estimates: map[string]float64{}},
		out:    out,
		procs:  procs,
		env:    subjects.Env{RedisAddr: srv.Addr, PoolSize: cfg.pool, Rate: cfg.rate, Period: cfg.period},
		subs:   filter(cfg.only, subjects.All()),
		ref:    cfg.gs[len(cfg.gs)/2],
		metas:  runMeta(cfg, version, hz, started),
	}
	fmt.Fprintf(out, "Go %s, GOMAXPROCS %d, %s/%s; redis-server %s on loopback (pid %d); CLK_TCK %d%s.\n",
		strings.TrimPrefix(runtime.Version(), "go"), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, version, srv.PID(), hz, assumedNote(assumed))
	fmt.Fprintf(out, "Limit %d per %v (the sliding window log: %d, its maximum), %d client IPs (per-tenant: %d keys), go-redis pool %d, benchtime %v, count %d (medians).\n",
		cfg.rate, cfg.period, min(cfg.rate, algorithms.MaxSlidingLogRate), cfg.clients, cfg.tenants, cfg.pool, cfg.benchtime, cfg.count)
	fmt.Fprintf(out, "Leased rows: redlimit's Redis store with redisstore.WithLeases(%v).\n\n", subjects.LeaseTTL)
	sections := []struct {
		name string
		run  func(context.Context) error
	}{
		{"compare", s.compare},
		{"tenants", s.tenants},
		{"denied", s.denied},
		{"sweep", s.sweep},
		{"memory", s.memory},
		{"http", s.http},
		{"allow", s.allow},
	}
	for _, sec := range sections {
		if !cfg.sections[sec.name] {
			continue
		}
		sectionStart := time.Now()
		if err := sec.run(ctx); err != nil {
			return err
		}
		s.took = append(s.took, fmt.Sprintf("%s %v", sec.name, time.Since(sectionStart).Round(time.Second)))
	}
	fmt.Fprintf(out, "Total time: %v (%s).\n", time.Since(started).Round(time.Second), strings.Join(s.took, ", "))
	return nil
}

// stopOnSignal returns a context that SIGINT or SIGTERM cancels; they also
// stop every process started here, by its PID, and end the program, since
// a benchmark run cannot be interrupted.
func stopOnSignal(srv *redisproc.Server, procs *procTable, logf func(string, ...any)) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig, ok := <-sigs
		if !ok {
			return
		}
		logf("compare: %v: stopping wrk and redis-server (pid %d)", sig, srv.PID())
		cancel()
		procs.killAll()
		srv.Stop()
		os.Exit(130)
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel()
	}
}

// httpSubjects are the real-HTTP rows: bare, the fastest-to-build peers and
// redlimit on both stores with the sliding window counter.
func httpSubjects(only *regexp.Regexp) []subjects.Subject {
	var out []subjects.Subject
	for _, s := range subjects.All() {
		if s.Kind == subjects.None || s.Peer || strings.HasSuffix(s.Name, string(algorithms.SlidingWindowCounter)) {
			out = append(out, s)
		}
	}
	return filter(only, out)
}

// filter keeps the bare handler and the subjects whose name matches only.
func filter(only *regexp.Regexp, subs []subjects.Subject) []subjects.Subject {
	var out []subjects.Subject
	for _, s := range subs {
		if s.Kind == subjects.None || only.MatchString(s.Name) {
			out = append(out, s)
		}
	}
	return out
}

func writeNotes(out io.Writer, notes []string) {
	fmt.Fprintln(out)
	for _, n := range notes {
		fmt.Fprintf(out, "- %s\n", n)
	}
	if len(notes) > 0 {
		fmt.Fprintln(out)
	}
}

func assumedNote(assumed bool) string {
	if assumed {
		return " (getconf failed; assumed)"
	}
	return " (from getconf)"
}

// procTable tracks the child processes (wrk) running, so that an
// interrupt stops each by its PID.
type procTable struct {
	mu      sync.Mutex
	running map[*exec.Cmd]struct{}
	closed  bool
}

// start starts cmd unless the table is closed.
func (p *procTable) start(cmd *exec.Cmd) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("stopping")
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p.running[cmd] = struct{}{}
	return nil
}

// wait waits for cmd and forgets it.
func (p *procTable) wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	p.mu.Lock()
	delete(p.running, cmd)
	p.mu.Unlock()
	return err
}

// killAll kills every running child by its PID and refuses new ones.
func (p *procTable) killAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for cmd := range p.running {
		_ = cmd.Process.Kill()
	}
}
