package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/bench/internal/harness"
	"github.com/redlimit/redlimit/bench/internal/subjects"
)

// fillers is how many goroutines write the distinct identities into Redis
// before a sweep step or a memory reading.
const fillers = 100

// sweepTable measures redlimit's Redis store at g (the middle concurrency)
// against the number of identities: for each algorithm, starting from an
// empty server, the identities are added in steps (each step's new ones
// served once), and at each step the middleware is measured count times
// over all identities so far. Redis's used_memory per identity is read at
// each step.
func (r *runner) sweepTable(ctx context.Context, algs []algorithms.Algorithm, env subjects.Env, sizes []int, g int) (*table, []string, error) {
	sizes = slices.Clone(sizes)
	slices.Sort(sizes)
	all := harness.Addrs(sizes[len(sizes)-1])
	t := &table{header: []string{"algorithm"}}
	for _, n := range sizes {
		t.header = append(t.header, fmt.Sprintf("%s ids req/s", short(n)))
	}
	for _, n := range sizes {
		t.header = append(t.header, fmt.Sprintf("%s ids B/id", short(n)))
	}
	var notes []string
	start := time.Now()
	for _, alg := range algs {
		s := subjects.RedlimitRedisSubject(alg, "")
		rps, mem, note, err := r.sweepOne(ctx, s, env, all, sizes, g)
		if err != nil {
			return nil, nil, err
		}
		if note != "" {
			notes = append(notes, note)
		}
		row := []string{string(alg)}
		for _, v := range rps {
			row = append(row, thousands(v))
		}
		for _, v := range mem {
			row = append(row, thousands(v))
		}
		t.add(row...)
		r.log("sweep %s done (%s elapsed)", alg, time.Since(start).Round(time.Second))
	}
	return t, notes, nil
}

// sweepOne runs the sweep for one subject; it returns the median req/s and
// the bytes of Redis memory per identity at each size.
func (r *runner) sweepOne(ctx context.Context, s subjects.Subject, env subjects.Env, all []string, sizes []int, g int) (rps, mem []float64, note string, err error) {
	if err := r.redis.FlushAll(ctx); err != nil {
		return nil, nil, "", err
	}
	inst, err := s.Build(env, subjects.Trivial)
	if err != nil {
		return nil, nil, "", fmt.Errorf("build %s: %w", s.Name, err)
	}
	defer inst.Close()
	base, _, err := r.prime(ctx, inst)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", s.Name, err)
	}
	filled := 0
	var standIns int64
	for _, n := range sizes {
		if err := ctx.Err(); err != nil {
			return nil, nil, "", err
		}
		if bad := harness.Warm(inst.Handler, all[filled:n], fillers, 1, http.StatusNoContent); bad > 0 {
			return nil, nil, "", fmt.Errorf("%s: %d requests refused while adding identities", s.Name, bad)
		}
		filled = n
		used, err := r.redis.UsedMemory(ctx)
		if err != nil {
			return nil, nil, "", err
		}
		mem = append(mem, float64(used-base)/float64(n))
		var xs []float64
		for range r.cfg.count {
			if err := harness.SetBenchtime(r.cfg.benchtime.String()); err != nil {
				return nil, nil, "", err
			}
			before, _ := counters(inst)
			res, err := harness.Measure(inst.Handler, all[:n], g, http.StatusNoContent, nil, nil, nil)
			if err != nil {
				return nil, nil, "", fmt.Errorf("measure %s with %d identities: %w", s.Name, n, err)
			}
			after, _ := counters(inst)
			standIns += after - before
			xs = append(xs, res.ReqPerSec())
		}
		rps = append(rps, median(xs))
		r.log("sweep %-40s %8s ids %10.0f req/s %6.0f B/id", s.Name, short(n), median(xs), mem[len(mem)-1])
	}
	if standIns > 0 {
		note = fmt.Sprintf("%s: %s decisions in the sweep were made by a stand-in, not Redis", s.Name, thousands(float64(standIns)))
	}
	return rps, mem, note, nil
}

// memoryTable reads Redis's memory per identity for every Redis subject:
// from an empty server, n distinct identities are each served once, and
// used_memory's growth and the number of keys are divided by n.
func (r *runner) memoryTable(ctx context.Context, subs []subjects.Subject, env subjects.Env, n int) (*table, error) {
	addrs := harness.Addrs(n)
	t := &table{header: []string{"middleware", "bytes/identity", "keys/identity"}}
	for _, s := range subs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := r.redis.FlushAll(ctx); err != nil {
			return nil, err
		}
		inst, err := s.Build(env, subjects.Trivial)
		if err != nil {
			return nil, fmt.Errorf("build %s: %w", s.Name, err)
		}
		base, keys0, err := r.prime(ctx, inst)
		if err == nil {
			if bad := harness.Warm(inst.Handler, addrs, fillers, 1, http.StatusNoContent); bad > 0 {
				err = fmt.Errorf("%d requests refused while adding identities", bad)
			}
		}
		inst.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		used, err := r.redis.UsedMemory(ctx)
		if err != nil {
			return nil, err
		}
		keys, err := r.redis.DBSize(ctx)
		if err != nil {
			return nil, err
		}
		per := float64(used-base) / float64(n)
		perKeys := float64(keys-keys0) / float64(n)
		t.add(s.Name, thousands(per), decimal(perKeys, 2))
		r.log("memory %-48s %6.0f B/id %.2f keys/id", s.Name, per, perKeys)
	}
	return t, nil
}

// primeCount is how many throwaway identities prime a middleware before
// Redis's memory is read: enough to open every pooled connection and load
// the scripts, so that their buffers are not counted against identities.
const primeCount = 2000

// prime serves throwaway identities through inst, then returns Redis's
// used_memory and key count as the base that identities are measured
// against.
func (r *runner) prime(ctx context.Context, inst *subjects.Instance) (usedMemory, keys int64, err error) {
	if bad := harness.Warm(inst.Handler, harness.OtherAddrs(primeCount), fillers, 1, http.StatusNoContent); bad > 0 {
		return 0, 0, fmt.Errorf("%d requests refused while priming", bad)
	}
	if usedMemory, err = r.redis.UsedMemory(ctx); err != nil {
		return 0, 0, err
	}
	if keys, err = r.redis.DBSize(ctx); err != nil {
		return 0, 0, err
	}
	return usedMemory, keys, nil
}

// short renders 1000 as 1k and 1000000 as 1M.
func short(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
