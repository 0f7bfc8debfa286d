package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"testing"

	"github.com/redlimit/redlimit/bench/internal/allowbench"
	"github.com/redlimit/redlimit/bench/internal/harness"
)

// allow prints the "allow" table: the
// memory store's bare Allow for a key in its steady state, per algorithm,
// against golang.org/x/time/rate behind a mutex-guarded map, over
// -clients keys at GOMAXPROCS goroutines, each subject once per round in
// turn so that all see the same machine. The target is no slower than the
// reference (ratio ≤ 1.00) and no allocation. It fails only when the
// benchmark time cannot be set.
func (s *session) allow(context.Context) error {
	cfg, out := s.cfg, s.out
	if err := harness.SetBenchtime(cfg.benchtime.String()); err != nil {
		return fmt.Errorf("allow: %w", err)
	}
	subs := allowbench.Subjects(cfg.clients)
	results := make([][]testing.BenchmarkResult, len(subs))
	for round := range cfg.count {
		for i, sub := range subs {
			fmt.Fprintf(os.Stderr, "compare: allow: round %d/%d: %s\n", round+1, cfg.count, sub.Name)
			results[i] = append(results[i], testing.Benchmark(sub.Bench))
		}
	}
	t := allowTable(subs, results)
	fmt.Fprintf(out, "**Bare Allow** (one decision for a key in its steady state, cost 1, %d keys, b.RunParallel at GOMAXPROCS %d; target: ≤ 1.00× x/time/rate and 0 allocs):\n\n",
		cfg.clients, runtime.GOMAXPROCS(0))
	t.write(out)
	writeNotes(out, []string{"x/time/rate: a `*rate.Limiter` per key in a `map[string]*rate.Limiter` behind a `sync.Mutex` (lookup, then `Allow()`); memstore: `Allow(ctx, key, 1)` on `memstore.New()`'s limiter. Same limit, same keys in the same order; each subject's state is made once and warmed for one period of the limit before the first timing, so that a sliding window log holds a full window; cpu-ns/op is the process's CPU time per call (about GOMAXPROCS × ns/op when idle; less sensitive to other load). `allowbench` in this module (`go test -bench Allow ./internal/allowbench/`)."})
	return nil
}

// allowTable makes the table from each subject's results, medians over the
// rounds; the reference's row comes first.
func allowTable(subs []allowbench.Subject, results [][]testing.BenchmarkResult) *table {
	t := &table{header: []string{"subject", "ns/op", "cpu-ns/op", "allocs/op", "B/op", "denied/op", "× x/time/rate", "target"}}
	ns := make([]float64, len(subs))
	ref := -1.0
	for i, rs := range results {
		ns[i] = median(allowFigures(rs, func(r testing.BenchmarkResult) float64 { return float64(r.T.Nanoseconds()) / float64(max(r.N, 1)) }))
		if subs[i].Ref {
			ref = ns[i]
		}
	}
	for i, rs := range results {
		// Any round's allocation fails the target.
		allocs := slices.Max(allowFigures(rs, func(r testing.BenchmarkResult) float64 { return float64(r.AllocsPerOp()) }))
		bytes := median(allowFigures(rs, func(r testing.BenchmarkResult) float64 { return float64(r.AllocedBytesPerOp()) }))
		cpu := median(allowFigures(rs, func(r testing.BenchmarkResult) float64 {
			if v, ok := r.Extra["cpu-ns/op"]; ok {
				return v
			}
			return math.NaN()
		}))
		denied := median(allowFigures(rs, func(r testing.BenchmarkResult) float64 { return r.Extra["denied/op"] }))
		target := "reference"
		if !subs[i].Ref {
			target = "no"
			if ns[i] <= ref && allocs == 0 {
				target = "yes"
			}
		}
		t.add(subs[i].Name, decimal(ns[i], 1), decimal(cpu, 1), thousands(allocs), thousands(bytes), decimal(denied, 4), ratio(ns[i], ref), target)
	}
	return t
}

func allowFigures(rs []testing.BenchmarkResult, f func(testing.BenchmarkResult) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}
