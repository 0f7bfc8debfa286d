// Package harness measures an http.Handler the way the comparison needs:
// a Go benchmark (testing.Benchmark, allocations reported) that serves
// requests with direct ServeHTTP calls on httptest recorders from a fixed
// number of goroutines, each request from a client address taken in turn
// from a table, and reads the redis-server's CPU time around the timed part.
package harness

import (
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// grain is how many iterations a goroutine claims at a time from the
// benchmark's b.N, so that all goroutines stay busy until the end without
// contending on the shared counter for every request.
const grain = 8

// Addrs returns n client addresses ("10.a.b.c:40000"), each its own
// identity, for Request.RemoteAddr.
func Addrs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = IP(i) + ":40000"
	}
	return out
}

// OtherAddrs returns n client addresses ("11.a.b.c:40000") that none of
// Addrs' are, for priming a middleware (its connections, Redis's script
// cache) without touching the identities to be measured.
func OtherAddrs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "11" + IP(i)[2:] + ":40000"
	}
	return out
}

// IP returns the i-th client address without a port: 10.a.b.c, with a.b.c
// the 24 low bits of i.
func IP(i int) string {
	return "10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255)
}

// CPUReader returns a process's CPU time in ticks of some clock (clock
// ticks from /proc/<pid>/stat, or nanoseconds), which the Result's
// per-request figures are given the rate of; nil means none is read.
type CPUReader func() (int64, error)

// Result is one measurement of one handler at one concurrency.
type Result struct {
	// N is the number of requests in the timed run.
	N int
	// NsPerOp is wall time per request: the inverse of throughput.
	NsPerOp float64
	// AllocsPerOp and BytesPerOp are the heap allocations per request, of
	// the whole process (the recorder's included).
	AllocsPerOp, BytesPerOp int64
	// RedisTicks is the redis-server's CPU time during the timed run, in
	// its CPUReader's ticks; -1 when not read.
	RedisTicks int64
	// AppTicks is this process's CPU time during the timed run (the
	// middleware, the handler, the recorders, the Redis client), in its
	// CPUReader's ticks; -1 when not read.
	AppTicks int64
	// RedisCommands is the number of commands Redis answered the
	// middleware during the timed run; -1 when not counted.
	RedisCommands int64
	// Unexpected counts responses whose status was not the wanted one.
	Unexpected int64
	// Served counts every request served by the benchmark, the ramp-up
	// runs that testing makes before the timed one included.
	Served int64
}

// ReqPerSec is the throughput, requests a second.
func (r Result) ReqPerSec() float64 {
	if r.NsPerOp <= 0 {
		return 0
	}
	return 1e9 / r.NsPerOp
}

// RedisMicrosPerOp is the redis-server's CPU time per request in µs, given
// its reader's ticks per second; negative when not measured.
func (r Result) RedisMicrosPerOp(hz int64) float64 {
	return perOp(r.RedisTicks, r.N, hz)
}

// AppMicrosPerOp is this process's CPU time per request in µs, given its
// reader's ticks per second; negative when not measured.
func (r Result) AppMicrosPerOp(hz int64) float64 {
	return perOp(r.AppTicks, r.N, hz)
}

// RedisCommandsPerOp is the Redis commands per request; negative when not
// counted.
func (r Result) RedisCommandsPerOp() float64 {
	if r.RedisCommands < 0 || r.N == 0 {
		return -1
	}
	return float64(r.RedisCommands) / float64(r.N)
}

func perOp(ticks int64, n int, hz int64) float64 {
	if ticks < 0 || n == 0 || hz <= 0 {
		return -1
	}
	return float64(ticks) * 1e6 / float64(hz) / float64(n)
}

// Warm serves each address passes times from g goroutines, so that the
// measurement starts with every identity known to the limiter (and, with
// a small limit, already over it). It returns the number of responses
// whose status was none of the accepted ones.
func Warm(h http.Handler, addrs []string, g, passes int, accept ...int) int64 {
	var bad atomic.Int64
	var next atomic.Int64
	total := int64(len(addrs) * passes)
	var wg sync.WaitGroup
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			for {
				i := next.Add(1) - 1
				if i >= total {
					return
				}
				r.RemoteAddr = addrs[i%int64(len(addrs))]
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				if !contains(accept, rec.Code) {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return bad.Load()
}

func contains(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// Measure runs h as a Go benchmark with g goroutines sharing b.N, each
// request from the next address in addrs (each goroutine starts at its own
// place), and checks every response's status against want. The benchmark
// time is testing's -test.benchtime (see SetBenchtime). cpu and app, where
// not nil, are read before and after the timed run: the redis-server's CPU
// time and this process's; so is commands, a count of the commands Redis
// answered the middleware.
func Measure(h http.Handler, addrs []string, g, want int, cpu, app CPUReader, commands func() int64) (Result, error) {
	var (
		lastTicks int64 = -1
		appTicks  int64 = -1
		cmds      int64 = -1
		cpuErr    error
		bad       atomic.Int64
		served    int64
	)
	br := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		reqs := make([]*http.Request, g)
		for w := range reqs {
			reqs[w] = httptest.NewRequest(http.MethodGet, "/", nil)
		}
		bad.Store(0)
		var next atomic.Int64
		n := int64(b.N)
		served += n
		var wg sync.WaitGroup
		before, appBefore := read(cpu, &cpuErr), read(app, &cpuErr)
		var cmdsBefore int64
		if commands != nil {
			cmdsBefore = commands()
		}
		b.ResetTimer()
		for w := range g {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := reqs[w]
				pos := w * len(addrs) / g
				for {
					end := next.Add(grain)
					start := end - grain
					if start >= n {
						return
					}
					for range min(end, n) - start {
						r.RemoteAddr = addrs[pos]
						if pos++; pos == len(addrs) {
							pos = 0
						}
						rec := httptest.NewRecorder()
						h.ServeHTTP(rec, r)
						if rec.Code != want {
							bad.Add(1)
						}
					}
				}
			}()
		}
		wg.Wait()
		b.StopTimer()
		if cpu != nil {
			lastTicks = read(cpu, &cpuErr) - before
		}
		if app != nil {
			appTicks = read(app, &cpuErr) - appBefore
		}
		if commands != nil {
			cmds = commands() - cmdsBefore
		}
	})
	if cpuErr != nil {
		return Result{}, fmt.Errorf("read CPU time: %w", cpuErr)
	}
	if br.N == 0 {
		return Result{}, fmt.Errorf("the benchmark did not run (did it fail?)")
	}
	return Result{
		N:             br.N,
		NsPerOp:       float64(br.T.Nanoseconds()) / float64(br.N),
		AllocsPerOp:   br.AllocsPerOp(),
		BytesPerOp:    br.AllocedBytesPerOp(),
		RedisTicks:    lastTicks,
		AppTicks:      appTicks,
		RedisCommands: cmds,
		Unexpected:    bad.Load(),
		Served:        served,
	}, nil
}

// read returns what r reads, 0 for a nil r; it records an error in errp.
func read(r CPUReader, errp *error) int64 {
	if r == nil {
		return 0
	}
	v, err := r()
	if err != nil {
		*errp = err
	}
	return v
}

// SetBenchtime sets the time (or "Nx" count) of every later Measure, as
// go test's -benchtime does. testing.Init must have been called, before
// flag.Parse.
func SetBenchtime(v string) error {
	if err := flag.Set("test.benchtime", v); err != nil {
		return fmt.Errorf("set the benchmark time to %q: %w", v, err)
	}
	return nil
}
