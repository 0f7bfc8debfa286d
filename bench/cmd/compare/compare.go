package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/redlimit/redlimit/bench/internal/harness"
	"github.com/redlimit/redlimit/bench/internal/redisproc"
	"github.com/redlimit/redlimit/bench/internal/subjects"
)

// runner holds what every measurement shares.
type runner struct {
	cfg   config
	redis redisServer
	hz    int64 // clock ticks per second, for this process's CPU time
	log   func(format string, args ...any)
	// estimates holds the ns/op of a subject at a concurrency, on one
	// traffic, from the first round, so that later rounds run a fixed number of iterations of
	// about the benchmark time, without testing's ramp-up.
	estimates map[string]float64
}

// nanosPerSecond is the rate of the redis-server's CPU reader, CPUNanos.
const nanosPerSecond = int64(time.Second)

// redisServer is what the comparison needs of the redis-server.
type redisServer interface {
	FlushAll(ctx context.Context) error
	UsedMemory(ctx context.Context) (int64, error)
	DBSize(ctx context.Context) (int64, error)
	CPUNanos() (int64, error)
}

// sample is one measurement, with what the subject's counters saw.
type sample struct {
	harness.Result
	standIns, cached int64
}

// measureOne builds s, warms it over addrs (passes times), and measures it
// at g goroutines, expecting status want from every request.
func (r *runner) measureOne(ctx context.Context, s subjects.Subject, env subjects.Env, addrs []string, g, passes, want int) (sample, error) {
	if s.Kind == subjects.Redis {
		if err := r.redis.FlushAll(ctx); err != nil {
			return sample{}, err
		}
	}
	inst, err := s.Build(env, subjects.Trivial)
	if err != nil {
		return sample{}, fmt.Errorf("build %s: %w", s.Name, err)
	}
	defer inst.Close()
	if bad := harness.Warm(inst.Handler, addrs, 50, passes, http.StatusNoContent, http.StatusTooManyRequests); bad > 0 {
		return sample{}, fmt.Errorf("%s: %d of the warm-up's responses were neither 204 nor 429", s.Name, bad)
	}
	var cpu harness.CPUReader
	if s.Kind == subjects.Redis {
		cpu = r.redis.CPUNanos
	}
	// The same subject runs in several sections: its speed depends on
	// the traffic (the keys and the wanted status) as much as on g.
	key := s.Name + "/" + strconv.Itoa(g) + "/" + strconv.Itoa(want) + "/" + strconv.Itoa(len(addrs))
	bt := r.cfg.benchtime.String()
	if est, ok := r.estimates[key]; ok && est > 0 {
		n := int(math.Round(float64(r.cfg.benchtime) / est))
		bt = strconv.Itoa(min(max(n, 200), 50_000_000)) + "x"
	}
	if err := harness.SetBenchtime(bt); err != nil {
		return sample{}, err
	}
	standIns0, cached0 := counters(inst)
	res, err := harness.Measure(inst.Handler, addrs, g, want, cpu, redisproc.SelfCPUTicks, inst.Commands)
	if err != nil {
		return sample{}, fmt.Errorf("measure %s at g=%d: %w", s.Name, g, err)
	}
	standIns1, cached1 := counters(inst)
	if _, ok := r.estimates[key]; !ok {
		r.estimates[key] = res.NsPerOp
	}
	return sample{Result: res, standIns: standIns1 - standIns0, cached: cached1 - cached0}, nil
}

func counters(inst *subjects.Instance) (standIns, cached int64) {
	if inst.StandIns != nil {
		standIns = inst.StandIns()
	}
	if inst.Cached != nil {
		cached = inst.Cached()
	}
	return standIns, cached
}

// series gathers a subject's samples per concurrency.
type series map[int][]sample

func (s series) medianOf(g int, f func(sample) float64) float64 {
	var xs []float64
	for _, x := range s[g] {
		if v := f(x); !math.IsNaN(v) && v >= 0 {
			xs = append(xs, v)
		}
	}
	return median(xs)
}

// flags sums the anomalies of every sample: unexpected statuses (of the
// timed runs), and of all requests served, ramp-up included, stand-in
// decisions and cached denials.
func (s series) flags() (unexpected, timed, standIns, cached, served int64) {
	for _, xs := range s {
		for _, x := range xs {
			unexpected += x.Unexpected
			timed += int64(x.N)
			standIns += x.standIns
			cached += x.cached
			served += x.Served
		}
	}
	return unexpected, timed, standIns, cached, served
}

// compareTable measures every subject at every concurrency, each request
// from the next of keys client addresses, count rounds interleaved (each
// round measures all of them once), and returns the table with its notes,
// and the medians at every concurrency as records of the section.
func (r *runner) compareTable(ctx context.Context, section string, subs []subjects.Subject, env subjects.Env, keys int, gs []int, passes, want int) (*table, []record, []string, error) {
	addrs := harness.Addrs(keys)
	results := make([]series, len(subs))
	for i := range results {
		results[i] = series{}
	}
	start := time.Now()
	for round := range r.cfg.count {
		for _, g := range gs {
			for i, s := range subs {
				if err := ctx.Err(); err != nil {
					return nil, nil, nil, err
				}
				smp, err := r.measureOne(ctx, s, env, addrs, g, passes, want)
				if err != nil {
					return nil, nil, nil, err
				}
				results[i][g] = append(results[i][g], smp)
				r.log("round %d/%d g=%-3d %-48s %10.0f ns/op %3d allocs (%s elapsed)",
					round+1, r.cfg.count, g, s.Name, smp.NsPerOp, smp.AllocsPerOp, time.Since(start).Round(time.Second))
			}
		}
	}

	ref := gs[len(gs)/2] // the middle concurrency (g=50 by default) for req/s, allocs and CPU
	best := map[subjects.Kind]float64{}
	for i, s := range subs {
		if s.Peer {
			best[s.Kind] = max(best[s.Kind], results[i].medianOf(ref, func(x sample) float64 { return x.ReqPerSec() }))
		}
	}
	t := &table{header: []string{"middleware"}}
	for _, g := range gs {
		t.header = append(t.header, fmt.Sprintf("g=%d ns/op", g))
		if g == ref {
			t.header = append(t.header, fmt.Sprintf("g=%d req/s", g))
		}
	}
	t.header = append(t.header, "allocs/op", "app CPU µs/op", "redis CPU µs/decision", "redis cmds/decision", fmt.Sprintf("g=%d req/s ÷ best peer", ref))
	var notes []string
	for i, s := range subs {
		res := results[i]
		row := []string{s.Name}
		for _, g := range gs {
			row = append(row, thousands(res.medianOf(g, func(x sample) float64 { return x.NsPerOp })))
			if g == ref {
				row = append(row, thousands(res.medianOf(g, func(x sample) float64 { return x.ReqPerSec() })))
			}
		}
		row = append(row, thousands(res.medianOf(ref, func(x sample) float64 { return float64(x.AllocsPerOp) })))
		row = append(row, decimal(res.medianOf(ref, func(x sample) float64 { return x.AppMicrosPerOp(r.hz) }), 1))
		row = append(row, decimal(res.medianOf(ref, func(x sample) float64 { return x.RedisMicrosPerOp(nanosPerSecond) }), 1))
		row = append(row, decimal(res.medianOf(ref, func(x sample) float64 { return x.RedisCommandsPerOp() }), 2))
		rps := res.medianOf(ref, func(x sample) float64 { return x.ReqPerSec() })
		row = append(row, ratio(rps, best[s.Kind]))
		t.add(row...)
		if unexpected, timed, standIns, cached, served := res.flags(); unexpected+standIns > 0 || cached > 0 {
			notes = append(notes, fmt.Sprintf("%s: %s of %s timed requests had another status than %d; of all %s requests served (ramp-up included), %s were decided by a stand-in (local twin, fail-open or fail-closed) and %s (%.1f%%) were denials repeated from the local denial cache without asking Redis",
				s.Name, thousands(float64(unexpected)), thousands(float64(timed)), want, thousands(float64(served)),
				thousands(float64(standIns)), thousands(float64(cached)), 100*float64(cached)/float64(max(served, 1))))
		}
	}
	return t, r.records(section, subs, results, gs), notes, nil
}

// records returns the medians of every subject at every concurrency.
func (r *runner) records(section string, subs []subjects.Subject, results []series, gs []int) []record {
	var recs []record
	for i, s := range subs {
		res := results[i]
		for _, g := range gs {
			unexpected, _, standIns, cached, served := series{g: res[g]}.flags()
			recs = append(recs, record{
				Section: section, Middleware: s.Name, Kind: s.Kind.String(), Peer: s.Peer, G: g,
				NsPerOp:       res.medianOf(g, func(x sample) float64 { return x.NsPerOp }),
				ReqPerSec:     res.medianOf(g, func(x sample) float64 { return x.ReqPerSec() }),
				AllocsPerOp:   res.medianOf(g, func(x sample) float64 { return float64(x.AllocsPerOp) }),
				BytesPerOp:    res.medianOf(g, func(x sample) float64 { return float64(x.BytesPerOp) }),
				AppMicros:     res.medianOf(g, func(x sample) float64 { return x.AppMicrosPerOp(r.hz) }),
				RedisMicros:   res.medianOf(g, func(x sample) float64 { return x.RedisMicrosPerOp(nanosPerSecond) }),
				RedisCommands: res.medianOf(g, func(x sample) float64 { return x.RedisCommandsPerOp() }),
				Rounds:        len(res[g]),
				Unexpected:    unexpected, StandIns: standIns, Cached: cached, Served: served,
			})
		}
	}
	return recs
}

// kindsNote explains the columns measured at the reference concurrency.
func kindsNote(ref int) string {
	return fmt.Sprintf("allocs/op, app CPU (this process: middleware, handler, recorder, Redis client), redis CPU (the redis-server's threads' run time, from /proc/<pid>/task/*/schedstat) and redis cmds (the commands Redis answered the middleware's client, counted by a go-redis hook: a script call or each command of a pipeline is one) are at g=%d. "+
		"The last column divides a row's g=%d req/s by the best peer's of the same kind: memory rows by the fastest in-memory peer, Redis rows by the fastest Redis-backed peer.", ref, ref)
}
