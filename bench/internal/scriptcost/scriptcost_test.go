// Package scriptcost measures what one decision costs Redis: the
// microseconds its scripts run, from INFO commandstats, free of the round
// trip and of this process, beside floors that decide nothing (floor.go).
// Each benchmark's subjects run one after another against one server (with
// -count, each subject's rounds back to back), so their figures compare:
// go test -run - -bench . -benchtime 10000x -count 5.
package scriptcost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/bench/internal/redisproc"
	"github.com/redlimit/redlimit/redisstore"
)

var keys = func() []string {
	k := make([]string, 1024)
	for i := range k {
		k[i] = fmt.Sprintf("ip:10.0.%d.%d", i/256, i%256)
	}
	return k
}()

// limit is high enough that every request is allowed; the sliding log's
// rate is capped, so it keeps a few hundred entries per key.
func limit(alg algorithms.Algorithm) algorithms.Limit {
	if alg == algorithms.SlidingWindowLog {
		return algorithms.Limit{Rate: algorithms.MaxSlidingLogRate, Period: 100 * time.Millisecond}
	}
	return algorithms.Limit{Rate: 1_000_000, Period: time.Second}
}

type decider func(ctx context.Context, key string) (bool, error)

func subjects(b *testing.B, c *redis.Client) ([]string, map[string]decider) {
	names := []string{"redis_rate", "ulule", "get_floor"}
	m := map[string]decider{}
	us, err := ululeredis.NewStore(c)
	if err != nil {
		b.Fatal(err)
	}
	ul := limiter.New(us, limiter.Rate{Period: time.Second, Limit: 1_000_000})
	m["ulule"] = func(ctx context.Context, k string) (bool, error) {
		r, err := ul.Get(ctx, k)
		return !r.Reached, err
	}
	rr := redis_rate.NewLimiter(c)
	m["redis_rate"] = func(ctx context.Context, k string) (bool, error) {
		r, err := rr.Allow(ctx, "rr:"+k, redis_rate.PerSecond(1_000_000))
		if err != nil {
			return false, err
		}
		return r.Allowed > 0, nil
	}
	m["get_floor"] = func(ctx context.Context, k string) (bool, error) {
		err := c.Get(ctx, "floor:"+k).Err()
		if err == redis.Nil {
			err = nil
		}
		return true, err
	}
	for _, f := range []struct{ name, src string }{{"script_floor", scriptFloor}, {"log_floor", logFloor}} {
		s := redis.NewScript(f.src)
		names = append(names, f.name)
		m[f.name] = func(ctx context.Context, k string) (bool, error) {
			return true, s.Run(ctx, c, []string{f.name + ":" + k}).Err()
		}
	}
	for _, alg := range algorithms.All() {
		store, err := redisstore.New(c, redisstore.WithDenialCache(0), redisstore.WithTimeout(2*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		l, err := algorithms.New(store, alg, limit(alg))
		if err != nil {
			b.Fatal(err)
		}
		names = append(names, string(alg))
		m[string(alg)] = func(ctx context.Context, k string) (bool, error) {
			r, err := l.Allow(ctx, k, 1)
			return r.Allowed, err
		}
	}
	return names, m
}

var (
	once sync.Once
	srv  *redisproc.Server
	serr error
)

func server(b *testing.B) *redis.Client {
	once.Do(func() { srv, serr = redisproc.Start() })
	if serr != nil {
		b.Fatal(serr)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// BenchmarkSerial is one request at a time: every decision a call of its own.
func BenchmarkSerial(b *testing.B) {
	run(b, 1)
}

// BenchmarkPair is 2 goroutines, as the comparison's g=2: every decision
// still a call of its own, two calls in flight.
func BenchmarkPair(b *testing.B) {
	run(b, 2)
}

// BenchmarkLoaded is 50 goroutines: redlimit batches the decisions in flight.
func BenchmarkLoaded(b *testing.B) {
	run(b, 50)
}

func run(b *testing.B, workers int) {
	c := server(b)
	names, m := subjects(b, c)
	for _, name := range names {
		decide := m[name]
		call := func(ctx context.Context, i int) error {
			ok, err := decide(ctx, keys[(i*7+i/len(keys))%len(keys)])
			if err == nil && !ok {
				err = errors.New("denied")
			}
			return err
		}
		b.Run(name, func(b *testing.B) { measure(b, c, workers, 1, call) })
	}
}

// measure makes b.N calls of perCall decisions each, call(i) for i from
// 2 × len(keys) / perCall on, on workers goroutines, after a warm-up of
// the calls before (which loads the scripts and fills the keys), and
// reports per decision the server's CPU time (cpu-µs/op) and the time
// commandstats counts for the calls (redis-µs/op: the scripts, or the
// GETs), and the decisions per call Redis saw.
func measure(b *testing.B, c *redis.Client, workers, perCall int, call func(ctx context.Context, i int) error) {
	ctx := context.Background()
	warm := 2 * len(keys) / perCall
	for i := range warm {
		if err := call(ctx, i); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	cpu0 := cpuNanos(b)
	var wg sync.WaitGroup
	var mu sync.Mutex
	n, next := b.N, 0
	b.ResetTimer()
	for range workers {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				if err := call(ctx, warm+i); err != nil {
					b.Errorf("call %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu := cpuNanos(b) - cpu0
	us, calls := redisMicros(b, c)
	decisions := float64(n * perCall)
	b.ReportMetric(float64(cpu)/1e3/decisions, "cpu-µs/op")
	b.ReportMetric(us/decisions, "redis-µs/op")
	b.ReportMetric(decisions/float64(calls), "decisions/call")
}

// cpuNanos is the server process's CPU time so far: what it spends on the
// network and its event loop too, which commandstats leaves out. Unlike
// commandstats' times, it does not grow when the server is made to wait for
// a CPU by another process.
func cpuNanos(b *testing.B) int64 {
	t, err := srv.CPUNanos()
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// redisMicros returns the time and the number of the calls sent: scripts
// (EVALSHA, EVAL), whose time includes the commands they run, which
// commandstats counts again under their own names; or, with no script,
// GETs.
func redisMicros(b *testing.B, c *redis.Client) (float64, int64) {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	us := map[string]float64{}
	calls := map[string]int64{}
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(field, "usec="); ok {
				us[name], _ = strconv.ParseFloat(v, 64)
			}
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				calls[name], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	if n := calls["cmdstat_evalsha"] + calls["cmdstat_eval"]; n > 0 {
		return us["cmdstat_evalsha"] + us["cmdstat_eval"], n
	}
	return us["cmdstat_get"], calls["cmdstat_get"]
}

func TestMain(m *testing.M) {
	code := m.Run()
	if srv != nil {
		srv.Stop()
	}
	os.Exit(code)
}
