// Package allowbench measures the cost of one bare decision for a key that
// already has state, away from HTTP: the memory store's Allow against the
// common hand-rolled alternative, a golang.org/x/time/rate limiter per key
// in a map behind a sync.Mutex. Both walk the same keys in the same order
// from every goroutine of b.RunParallel, at the same limit, high enough
// that every request passes; each reports denied/op, which should read 0.
package allowbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
)

// Keys is the number of distinct keys the benchmarks spread requests over.
const Keys = 10_000

// Limit is every subject's limit: the sliding window log's largest rate,
// per second, so that no key is denied at any speed this machine reaches
// (a key sees about a ten-thousandth of the requests).
var Limit = algorithms.PerSecond(algorithms.MaxSlidingLogRate)

// keyTable returns n keys like client addresses, in a fixed shuffled order,
// so that consecutive requests land in unrelated places of either subject.
func keyTable(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return keys
}

// steady makes allow's state what a long run leaves: it calls allow for
// keys in turn from GOMAXPROCS goroutines for one period of Limit, so
// that every key holds a full window of admissions (the sliding window
// log's grow with the request rate) before anything is timed.
func steady(keys []string, allow func(key string) bool) {
	var wg sync.WaitGroup
	end := time.Now().Add(Limit.Period)
	for g := range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			i := (g + 1) * 7919 % len(keys)
			for n := 0; n%1024 != 0 || time.Now().Before(end); n++ {
				allow(keys[i])
				if i++; i == len(keys) {
					i = 0
				}
			}
		})
	}
	wg.Wait()
}

// runParallel calls allow for keys in turn from b.RunParallel's goroutines,
// each starting at its own place in the table, and reports the share of
// calls that allow reported denied and the process's CPU time per call
// (cpu-ns/op: about GOMAXPROCS × ns/op on an idle machine, and less
// sensitive than ns/op to other processes sharing the CPUs).
func runParallel(b *testing.B, keys []string, allow func(key string) bool) {
	var next, denied atomic.Int64
	b.ReportAllocs()
	cpu0, cpuOK := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)*7919) % len(keys)
		var no int64
		for pb.Next() {
			if !allow(keys[i]) {
				no++
			}
			if i++; i == len(keys) {
				i = 0
			}
		}
		denied.Add(no)
	})
	b.StopTimer()
	if cpu1, ok := cpuTime(); ok && cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(max(b.N, 1)), "cpu-ns/op")
	}
	b.ReportMetric(float64(denied.Load())/float64(max(b.N, 1)), "denied/op")
}

// Memstore returns a benchmark of a memory store's Allow under alg, at
// Limit, over n keys whose state is steady (see steady): the store is made
// and warmed once, on the benchmark's first call, and kept for the rest.
func Memstore(alg algorithms.Algorithm, n int) func(b *testing.B) {
	var (
		once  sync.Once
		allow func(key string) bool
		err   error
	)
	keys := keyTable(n)
	return func(b *testing.B) {
		once.Do(func() {
			var l algorithms.RateLimiter
			var store *memstore.Store
			if store, err = memstore.New(); err != nil {
				return
			}
			if l, err = algorithms.New(store, alg, Limit); err != nil {
				return
			}
			ctx := context.Background()
			allow = func(key string) bool {
				r, err := l.Allow(ctx, key, 1)
				if err != nil {
					panic(err) // b.Fatal may not be called from RunParallel's goroutines
				}
				return r.Allowed
			}
			steady(keys, allow)
		})
		if err != nil {
			b.Fatal(err)
		}
		runParallel(b, keys, allow)
	}
}

// keyedRate is a rate.Limiter per key in a map behind one mutex, the
// usual way to key golang.org/x/time/rate.
type keyedRate struct {
	mu     sync.Mutex
	m      map[string]*rate.Limiter
	r      rate.Limit
	bucket int
}

func (k *keyedRate) allow(key string) bool {
	k.mu.Lock()
	l, ok := k.m[key]
	if !ok {
		l = rate.NewLimiter(k.r, k.bucket)
		k.m[key] = l
	}
	k.mu.Unlock()
	return l.Allow()
}

// XTimeRate returns a benchmark of a golang.org/x/time/rate limiter per key,
// at Limit as a token bucket, found in a mutex-guarded map (lookup and
// Allow), over n keys, made and warmed once as Memstore's are.
func XTimeRate(n int) func(b *testing.B) {
	var once sync.Once
	k := &keyedRate{
		m:      make(map[string]*rate.Limiter, n),
		r:      rate.Limit(float64(Limit.Rate) / Limit.Period.Seconds()),
		bucket: Limit.Rate,
	}
	keys := keyTable(n)
	return func(b *testing.B) {
		once.Do(func() { steady(keys, k.allow) })
		runParallel(b, keys, k.allow)
	}
}

// Subject is one row of the comparison.
type Subject struct {
	Name  string // a benchmark name: no spaces or slashes
	Bench func(b *testing.B)
	Ref   bool // the reference the others are measured against
}

// Subjects returns the reference, golang.org/x/time/rate ("xtimerate"),
// first, then the memory store under every algorithm ("memstore_" and the
// algorithm), each over n keys.
func Subjects(n int) []Subject {
	out := []Subject{{Name: "xtimerate", Bench: XTimeRate(n), Ref: true}}
	for _, alg := range algorithms.All() {
		out = append(out, Subject{Name: "memstore_" + string(alg), Bench: Memstore(alg, n)})
	}
	return out
}
