package redisstore

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
)

// The leases' simulation across windows: the stores of leaseSim (N
// stores on separate clients, leaseSimSizes) under a limit of L =
// leaseSimQuota per second with WithLeases(100 ms), for winWindows
// windows and more. Each instance's goroutines ask at exponential gaps
// (Poisson traffic), and all of them at once the instant a key's window
// begins (a burst of every instance). Every request is timed around the
// call, [b, a] on the wall clock, which is the clock Redis's TIME reads:
// the limiter decided it at some instant within.
const (
	winPeriod  = time.Second
	winTTL     = 100 * time.Millisecond
	winWindows = 3
	winPoll    = 5 * time.Millisecond
)

// winLimit is L per winPeriod.
func winLimit() algorithms.Limit { return algorithms.Limit{Rate: leaseSimQuota, Period: winPeriod} }

// winRec is one request: when it was sent (b) and answered (a), µs of
// Unix time, by which instance, and whether it was admitted.
type winRec struct {
	b, a   int64
	inst   int
	ok     bool
	local  bool // decided by the fault path
	cached bool // a denial repeated from the denial cache
}

// winBell rings the bursts of one key: every goroutine waiting on it
// fires when it rings.
type winBell struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *winBell) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *winBell) ring() {
	b.mu.Lock()
	close(b.ch)
	b.ch = make(chan struct{})
	b.mu.Unlock()
}

// winSim is a run across windows: leaseSim's stores under winLimit, what
// each key's requests were, and what a poller read of each key's state in
// Redis: the fixed window's window ends (and its count in each), the
// sliding counter's window starts, the most lease holders.
type winSim struct {
	*leaseSim
	alg     algorithms.Algorithm
	admin   *redis.Client
	clients []*redis.Client
	faulty  int           // the instance whose decisions may be the fault path's (-1: none)
	dead    []atomic.Bool // instances that send no more
	mu      []sync.Mutex
	recs    [][]winRec
	edges   []map[int64]int // per key: window end (fixed) or start (sliding) → the last count read in it
	holders []int64         // per key: the most live lease holders read
	bells   []winBell
	began   int64
}

// winDial says how instance inst reaches Redis: its client's options and
// the store's options after the simulation's.
type winDial func(inst int) (*redis.Options, []Option)

// winDirect is a winDial of every instance to addr, with nothing more.
func winDirect(addr string) winDial {
	return func(int) (*redis.Options, []Option) { return &redis.Options{Addr: addr}, nil }
}

// newWinSim starts size.n stores of alg under prefix, reaching Redis as
// dial says, for keys; every decision must be Redis's or a lease's
// (faulty: but that instance's, -1 for none).
func newWinSim(t *testing.T, dial winDial, prefix string, size leaseSimSize, alg algorithms.Algorithm, faulty int, keys ...string) *winSim {
	t.Helper()
	sim := &leaseSim{t: t, size: size, keys: keys}
	w := &winSim{leaseSim: sim, alg: alg, faulty: faulty, dead: make([]atomic.Bool, size.n),
		mu: make([]sync.Mutex, len(keys)), recs: make([][]winRec, len(keys)),
		edges: make([]map[int64]int, len(keys)), holders: make([]int64, len(keys)), bells: make([]winBell, len(keys))}
	for inst := range size.n {
		ro, opts := dial(inst)
		ro.PoolSize = 8 * size.goroutines
		c := redis.NewClient(ro)
		t.Cleanup(func() { _ = c.Close() })
		l, s := leasedOn(t, c, alg, winLimit(), winTTL, append([]Option{WithPrefix(prefix), WithEvictionAllowed(),
			WithInstances(size.n), WithTimeout(10 * time.Second), withLeaseBusy(simBusy)}, opts...)...)
		sim.stores, sim.ls, w.clients = append(sim.stores, s), append(sim.ls, l), append(w.clients, c)
		if inst == 0 {
			// Redis itself, for the poller: the first instance's address
			// may be a proxy's.
			w.admin = redis.NewClient(&redis.Options{Addr: ro.Addr})
			t.Cleanup(func() { _ = w.admin.Close() })
		}
	}
	for i := range keys {
		w.edges[i] = map[int64]int{}
		w.bells[i].ch = make(chan struct{})
	}
	return w
}

// ask sends one request of key i to instance inst and records it. Every
// decision must be Redis's or a lease's: the fault path has no part here.
func (w *winSim) ask(inst, i int) {
	if w.dead[inst].Load() {
		return
	}
	b := time.Now().UnixMicro()
	res, err := w.ls[inst].Allow(context.Background(), w.keys[i], 1)
	a := time.Now().UnixMicro()
	if err != nil {
		w.t.Errorf("Allow: %v", err)
		return
	}
	local := res.Decider != algorithms.DecidedByStore && res.Decider != algorithms.DecidedByCache
	if local && inst != w.faulty {
		w.t.Errorf("%s: decided by %s, want Redis or a lease", w.keys[i], res.Decider)
	}
	w.mu[i].Lock()
	w.recs[i] = append(w.recs[i], winRec{b: b, a: a, inst: inst, ok: res.Allowed, local: local,
		cached: res.Decider == algorithms.DecidedByCache})
	w.mu[i].Unlock()
}

// winTraffic is what one instance sends one key: rate requests a second
// at exponential gaps, and burst at once when the key's window begins.
type winTraffic func(inst int) (rate float64, burst int)

// run sends every key its traffic on size.goroutines goroutines per
// instance and key, for d, while the poller reads the keys' states and
// rings their bells at their windows' starts; each of events runs on a
// goroutine of its own once the traffic has begun, until stop.
func (w *winSim) run(d time.Duration, traffic []winTraffic, events ...func(stop <-chan struct{})) {
	stop := make(chan struct{})
	w.began = time.Now().UnixMicro()
	var wg, bg sync.WaitGroup
	bg.Go(func() { w.poll(stop) })
	for i := range w.keys {
		bg.Go(func() { w.ringAtEdges(i, stop) })
	}
	for _, e := range events {
		bg.Go(func() { e(stop) })
	}
	g := w.size.goroutines
	for i := range w.keys {
		for inst := range w.size.n {
			rate, burst := traffic[i](inst)
			for gi := range g {
				rng := rand.New(rand.NewPCG(uint64(inst)<<32|uint64(gi), uint64(i)))
				wg.Go(func() { w.send(inst, i, rate/float64(g), (burst+g-1)/g, rng, stop) })
			}
		}
	}
	time.Sleep(d)
	close(stop)
	wg.Wait()
	bg.Wait()
}

// send is one goroutine of run.
func (w *winSim) send(inst, i int, rate float64, burst int, rng *rand.Rand, stop <-chan struct{}) {
	for !w.dead[inst].Load() {
		bell := w.bells[i].wait()
		timer := time.NewTimer(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		select {
		case <-stop:
			timer.Stop()
			return
		case <-bell:
			timer.Stop()
			for range burst {
				w.ask(inst, i)
			}
		case <-timer.C:
			w.ask(inst, i)
		}
	}
}

// ringAtEdges rings key i's bell at the start of each of its windows
// after the first: for the fixed window at the end of the window the
// poller last read (the burst then begins the next one), for the sliding
// counter at its series' next start, for the buckets every period.
func (w *winSim) ringAtEdges(i int, stop <-chan struct{}) {
	last := w.began
	for {
		next := w.nextEdge(i, last)
		wait := time.Millisecond
		if next > 0 {
			wait = time.Until(time.UnixMicro(next))
		}
		select {
		case <-stop:
			return
		case <-time.After(wait):
		}
		if next > 0 && time.Now().UnixMicro() >= next {
			w.bells[i].ring()
			last = next
		}
	}
}

// nextEdge returns key i's next window start after µs after, 0 while the
// poller has not read it.
func (w *winSim) nextEdge(i int, after int64) int64 {
	w.mu[i].Lock()
	defer w.mu[i].Unlock()
	period := winPeriod.Microseconds()
	switch w.alg {
	case algorithms.FixedWindow:
		next := int64(0)
		for e := range w.edges[i] {
			if e > after && (next == 0 || e < next) {
				next = e
			}
		}
		return next
	case algorithms.SlidingWindowCounter:
		for s := range w.edges[i] {
			return s + ((after-s)/period+1)*period
		}
		return 0
	}
	return w.began + ((after-w.began)/period+1)*period
}

// poll reads every key's state and lease holders every winPoll until
// stop, all in one round trip.
func (w *winSim) poll(stop <-chan struct{}) {
	ctx := context.Background()
	gets, counts := make([]*redis.StringCmd, len(w.keys)), make([]*redis.IntCmd, len(w.keys))
	for {
		select {
		case <-stop:
			return
		case <-time.After(winPoll):
		}
		now := strconv.FormatInt(time.Now().UnixMicro(), 10)
		_, _ = w.admin.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, key := range w.keys {
				lk := w.ls[0].leaseKeys(key)
				gets[i], counts[i] = p.Get(ctx, lk[0]), p.ZCount(ctx, lk[2], now, "+inf")
			}
			return nil
		})
		for i := range w.keys {
			w.note(i, gets[i].Val(), counts[i].Val())
		}
	}
}

// note keeps what the poller read of key i: its state v and its live
// lease holders n.
func (w *winSim) note(i int, v string, n int64) {
	v, _, _ = strings.Cut(v, "|")
	f := strings.Split(v, ":")
	w.mu[i].Lock()
	defer w.mu[i].Unlock()
	w.holders[i] = max(w.holders[i], n)
	if len(f) >= 2 && (w.alg == algorithms.FixedWindow || w.alg == algorithms.SlidingWindowCounter) {
		e, err1 := strconv.ParseInt(f[0], 10, 64)
		c, err2 := strconv.Atoi(f[1])
		if err1 == nil && err2 == nil {
			w.edges[i][e] = c
		}
	}
}

// winOf is one window [start, end) of a key: the requests surely decided
// in it (b ≥ start, a < end), and how many admissions straddle its edges
// (decided in it or beside it).
type winOf struct {
	start, end      int64
	admitted, asked []winRec
	straddling      int
}

// windows returns key i's windows, as the poller read them, with their
// requests, in order.
func (w *winSim) windows(i int) []winOf {
	period := winPeriod.Microseconds()
	var starts []int64
	switch w.alg {
	case algorithms.FixedWindow:
		for e := range w.edges[i] {
			starts = append(starts, e-period)
		}
	case algorithms.SlidingWindowCounter:
		first := int64(-1)
		for s := range w.edges[i] {
			if first < 0 || s < first {
				first = s
			}
		}
		for s := range w.edges[i] {
			if (s-first)%period != 0 {
				w.t.Errorf("%s: a window starts at %d, not a period after %d: the series began again", w.keys[i], s, first)
			}
		}
		for s := first; first >= 0 && s < time.Now().UnixMicro(); s += period {
			starts = append(starts, s)
		}
	}
	slices.Sort(starts)
	out := make([]winOf, len(starts))
	for k, s := range starts {
		out[k] = winOf{start: s, end: s + period}
		for _, r := range w.recs[i] {
			switch {
			case r.b >= s && r.a < s+period:
				out[k].asked = append(out[k].asked, r)
				if r.ok {
					out[k].admitted = append(out[k].admitted, r)
				}
			case r.ok && (r.b < s && r.a >= s || r.b < s+period && r.a >= s+period):
				out[k].straddling++
			}
		}
	}
	return out
}
