package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/internal/scripts"
)

// frozen replaces Redis's clock in a script by a clock the test sets, so
// that two scripts run "at one instant" and their answers and states can
// be compared byte for byte.
func frozen(src string) *redis.Script {
	return redis.NewScript(strings.ReplaceAll(src, "redis.call('TIME')", "redis.call('HMGET', 'attack3:clock', 's', 'us')"))
}

// frozenStep moves the frozen clock for the next step of a differential
// test, from now (µs) by a draw of rng: not at all, by up to a
// millisecond, by up to one emission interval of lim, or by up to two
// periods; with back, a fifth draw moves it back by up to two periods, as
// a clock that was ahead leaves states in the future. It first deletes
// each pair of twin keys (a[i], b[i]) about to expire: keys expire in real
// time, on PX the frozen clock set, so one could expire between the two
// scripts' calls; both start afresh then (a key with less than a
// millisecond left reads a PTTL of 0). It returns the new now and
// whether the clock moved back.
func frozenStep(ctx context.Context, c *redis.Client, rng *rand.Rand, now int64, lim algorithms.Limit, back bool, a, b []string) (int64, bool) {
	for i := range a {
		if pa, pb := c.PTTL(ctx, a[i]).Val(), c.PTTL(ctx, b[i]).Val(); pa >= 0 && pa < 200*time.Millisecond || pb >= 0 && pb < 200*time.Millisecond {
			c.Del(ctx, a[i], b[i])
		}
	}
	periodUs := lim.Period.Microseconds()
	draws, moved := 4, false
	if back {
		draws = 5
	}
	switch rng.IntN(draws) {
	case 0:
	case 1:
		now += rng.Int64N(1000)
	case 2:
		now += rng.Int64N(periodUs/int64(max(lim.Rate, 1)) + 1)
	case 3:
		now += rng.Int64N(2*periodUs + 1)
	default:
		now -= rng.Int64N(2*periodUs + 1)
		moved = true
	}
	c.HSet(ctx, "attack3:clock", "s", now/1_000_000, "us", now%1_000_000)
	return now, moved
}

// stateOf returns a key's type and content, whatever its type.
// expiredBetween reports whether the states sa of key a and sb of key b
// differ only because one of them, written with a lifetime of a few
// milliseconds on the frozen clock, expired in real time before the other
// was read.
func expiredBetween(ctx context.Context, c *redis.Client, a, b, sa, sb string) bool {
	const soon = 50 * time.Millisecond
	switch {
	case sa == "none":
		return c.PTTL(ctx, b).Val() <= soon
	case sb == "none":
		return c.PTTL(ctx, a).Val() <= soon
	}
	return false
}

// expiries reads the PTTLs of a and b in one transaction: at one instant
// of Redis's clock.
func expiries(ctx context.Context, t *testing.T, c *redis.Client, a, b string) (time.Duration, time.Duration) {
	t.Helper()
	var ta, tb *redis.DurationCmd
	if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		ta, tb = p.PTTL(ctx, a), p.PTTL(ctx, b)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ta.Val(), tb.Val()
}

func stateOf(ctx context.Context, t *testing.T, c *redis.Client, key string) string {
	t.Helper()
	// One transaction: a key that expires while it is read reads as
	// none, never as its type without its content. The reads of the
	// other types fail with WRONGTYPE, and are not used.
	var typ *redis.StatusCmd
	var str *redis.StringCmd
	var zset *redis.ZSliceCmd
	var hash *redis.MapStringStringCmd
	_, _ = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		typ, str = p.Type(ctx, key), p.Get(ctx, key)
		zset, hash = p.ZRangeWithScores(ctx, key, 0, -1), p.HGetAll(ctx, key)
		return nil
	})
	if err := typ.Err(); err != nil {
		t.Fatal(err)
	}
	switch typ.Val() {
	case "string":
		return "string " + str.Val()
	case "zset":
		return fmt.Sprint("zset ", zset.Val())
	case "hash":
		return fmt.Sprint("hash ", hash.Val())
	}
	return typ.Val()
}

// The one-request script and the driver give the same answer and leave
// the same state (and expiry, and kept reply) for one request of a plain
// cost, on random sequences in which the driver's other kinds (peeks,
// reservations, refunds, charges, overdraws) and several requests in one
// call run on both keys in between; limits include coarse time units.
func TestOneScriptMatchesDriver(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	limits := []algorithms.Limit{
		algorithms.PerSecond(3),
		{Rate: 7, Period: time.Second, Burst: 10},
		{Rate: 5, Period: 250 * time.Millisecond, Burst: 2},
		{Rate: 3, Period: 333_333 * time.Microsecond},
		// Coarse units: numbers past 2^53 in µs.
		{Rate: 1_000_000, Period: 1000 * 24 * time.Hour, Burst: 5_000_000},
		{Rate: 1_000_003, Period: 97 * 24 * time.Hour},
	}
	for _, alg := range algorithms.All() {
		for li, lim := range limits {
			t.Run(fmt.Sprintf("%s/%d", alg, li), func(t *testing.T) {
				p := ratemath.ParamsFor(alg, lim)
				one := frozen(scripts.OneRequest(string(alg), p.Rate, p.Period, p.Burst, p.Unit))
				drv := frozen(map[algorithms.Algorithm]string{
					algorithms.FixedWindow: scripts.FixedWindow, algorithms.SlidingWindowLog: scripts.SlidingWindowLog,
					algorithms.SlidingWindowCounter: scripts.SlidingWindowCounter, algorithms.TokenBucket: scripts.TokenBucket,
					algorithms.LeakyBucket: scripts.LeakyBucket,
				}[alg])
				limArgs := []any{p.Rate, p.Period, p.Burst, p.Unit}
				c.FlushAll(ctx)
				rng := rand.New(rand.NewPCG(uint64(li), 7))
				now := int64(1_764_000_000_000_000) // µs
				quota := ratemath.QuotaOf(alg, lim) // Allow refuses more (ErrCostExceedsLimit), and cost 0
				periodUs := lim.Period.Microseconds()
				a, b := "a:{k}:s", "b:{k}:s"
				var apart time.Duration // the widest real-time gap between the two keys' writes
				for step := range stepsOf(400) {
					now, _ = frozenStep(ctx, c, rng, now, lim, false, []string{a}, []string{b})
					var list string
					plain := rng.IntN(2) == 0
					if plain {
						list = strconv.Itoa([]int{1, 1, 2, max(quota/2, 1), quota}[rng.IntN(5)])
					} else {
						list = []string{"p1", "1 1", "2 p1 1", fmt.Sprintf("d%d:%d", rng.Int64N(3*periodUs), 1+rng.IntN(quota)),
							fmt.Sprintf("r%d/%d", 1+rng.IntN(2), rng.Int64N(periodUs)), fmt.Sprintf("c%d", 1+rng.IntN(quota)),
							fmt.Sprintf("o%d", 1+rng.IntN(3*quota))}[rng.IntN(7)]
					}
					withOnce := rng.IntN(2) == 0
					ttl := []string{"60000", "-60000"}[rng.IntN(2)]
					onceA, onceB := fmt.Sprintf("a:{k}:once:%d", step), fmt.Sprintf("b:{k}:once:%d", step)
					// Key a: the one-request script for plain costs; key b: always the driver.
					var ra, rb *redis.Cmd
					written := time.Now()
					if plain {
						if withOnce {
							ra = one.Run(ctx, c, []string{a, onceA}, list, ttl)
						} else {
							ra = one.Run(ctx, c, []string{a}, list)
						}
					} else {
						args := append([]any{list}, limArgs...)
						if withOnce {
							args = append(args, ttl)
							ra = drv.Run(ctx, c, []string{a, onceA}, args...)
						} else {
							ra = drv.Run(ctx, c, []string{a}, args...)
						}
					}
					args := append([]any{list}, limArgs...)
					if withOnce {
						rb = drv.Run(ctx, c, []string{b, onceB}, append(args, ttl)...)
					} else {
						rb = drv.Run(ctx, c, []string{b}, args...)
					}
					if fmt.Sprint(ra.Val(), ra.Err()) != fmt.Sprint(rb.Val(), rb.Err()) {
						t.Fatalf("step %d, %q (once %v): one-request %q %v, driver %q %v", step, list, withOnce, ra.Val(), ra.Err(), rb.Val(), rb.Err())
					}
					sa, sb := stateOf(ctx, t, c, a), stateOf(ctx, t, c, b)
					if sa != sb && !expiredBetween(ctx, c, a, b, sa, sb) {
						t.Fatalf("step %d, %q: states differ: one-request %s, driver %s", step, list, sa, sb)
					}
					if alg == algorithms.TokenBucket && sa != "none" && !tokenState.MatchString(sa) {
						t.Fatalf("step %d, %q: token bucket state %s, want none or \"<tokens>:<time>\"", step, list, sa)
					}
					// Both expiries read at one instant (MULTI): they differ by
					// what the scripts set plus the real time between their
					// writes, which a loaded machine can stretch. A step that
					// writes neither key leaves the expiries an earlier step
					// set, so the slack is the widest gap of the run.
					apart = max(apart, time.Since(written))
					if ta, tb := expiries(ctx, t, c, a, b); ta-tb > 20*time.Millisecond+apart || tb-ta > 20*time.Millisecond+apart {
						t.Fatalf("step %d, %q: expiries differ: one-request %v, driver %v (written %v apart at most)", step, list, ta, tb, apart)
					}
					if ka, kb := c.Get(ctx, onceA).Val(), c.Get(ctx, onceB).Val(); ka != kb {
						t.Fatalf("step %d, %q: kept replies differ: one-request %q, driver %q", step, list, ka, kb)
					}
				}
			})
		}
	}
}

// Two limiters of one store whose single limits differ (each its own
// one-request script) count a key apart, exactly to their quotas, when
// their requests go in pipelines of many keys and Redis loses every script
// between rounds (SCRIPT FLUSH): on one server and on Cluster.
func TestOneScriptFlushedAndShared(t *testing.T) {
	ctx := context.Background()
	standalone := redistest.Standalone(t)
	cluster := redistest.Cluster(t)
	clients := map[string]func() redis.UniversalClient{
		"standalone": func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: standalone}) },
		"cluster":    func() redis.UniversalClient { return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster}) },
	}
	flush := func(c redis.UniversalClient) {
		if cc, ok := c.(*redis.ClusterClient); ok {
			_ = cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.ScriptFlush(ctx).Err() })
			return
		}
		c.ScriptFlush(ctx)
	}
	for name, newClient := range clients {
		for _, alg := range algorithms.All() {
			t.Run(name+"/"+string(alg), func(t *testing.T) {
				c := newClient()
				defer c.Close()
				s := must(New(c, WithPrefix("a3s-"+string(alg)), WithTimeout(2*time.Second), WithDenialCache(0)))
				defer s.Close(closeCtx())
				quotas := []int{5, 7}
				ls := make([]algorithms.RateLimiter, len(quotas))
				for i, q := range quotas {
					l, err := algorithms.New(s, alg, algorithms.PerHour(q))
					if err != nil {
						t.Fatal(err)
					}
					ls[i] = l
				}
				const keys, rounds = 12, 9
				allowed := make([][keys]atomic32, len(ls))
				for range rounds {
					flush(c)
					var wg sync.WaitGroup
					for i, l := range ls {
						for k := range keys {
							wg.Add(1)
							go func() {
								defer wg.Done()
								res, err := l.Allow(ctx, fmt.Sprintf("k%d", k), 1)
								if err != nil || res.Decider != algorithms.DecidedByStore {
									t.Errorf("%+v %v", res, err)
									return
								}
								if res.Allowed {
									allowed[i][k].Add(1)
								}
							}()
						}
					}
					wg.Wait()
				}
				if n := evals(ctx, c); n < rounds {
					t.Errorf("%d EVALs (scripts sent in full) in %d rounds after SCRIPT FLUSH, want one a round at least", n, rounds)
				}
				for i, q := range quotas {
					for k := range keys {
						if got := allowed[i][k].Load(); got != int32(q) {
							t.Errorf("limiter %d/hour, key %d: %d allowed in %d requests, want %d", q, k, got, rounds, q)
						}
					}
				}
			})
		}
	}
}

type atomic32 = atomic.Int32

// evals counts the EVAL commands the servers behind c have run.
func evals(ctx context.Context, c redis.UniversalClient) int {
	var n atomic.Int64
	count := func(info string) {
		for _, line := range strings.Split(info, "\r\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_eval:calls="); ok {
				v, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				n.Add(int64(v))
			}
		}
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		_ = cc.ForEachShard(ctx, func(ctx context.Context, s *redis.Client) error {
			count(s.Info(ctx, "commandstats").Val())
			return nil
		})
		return int(n.Load())
	}
	count(c.Info(ctx, "commandstats").Val())
	return int(n.Load())
}

// nosyHook reads every command before go-redis writes it, as a tracing or
// logging hook would (String, Args), and, with marshal, also renders its
// arguments itself (MarshalBinary) as a hook that measures or copies the
// command might.
type nosyHook struct{ marshal bool }

func (nosyHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h nosyHook) look(cmd redis.Cmder) {
	_ = cmd.String()
	for _, a := range cmd.Args() {
		if m, ok := a.(interface{ MarshalBinary() ([]byte, error) }); ok && h.marshal {
			_, _ = m.MarshalBinary()
		}
	}
}

func (h nosyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.look(cmd)
		return next(ctx, cmd)
	}
}

func (h nosyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.look(cmd)
		}
		return next(ctx, cmds)
	}
}

// Replies lost on the way back, while Redis has lost its scripts (each
// call first answered NOSCRIPT, then sent in full), with calls alone and
// in pipelines, through pooled calls reused at once, and with a hook that
// reads (or renders) every command before it is written: every request
// Redis decided counts exactly once. make test runs every algorithm
// without a hook and under one of the two hooks, in turn; make test-scale
// (wholeMatrix) every algorithm under each.
func TestOneScriptLostRepliesCountOnce(t *testing.T) {
	counts := &dropCounts{}
	proxyAddr, direct := lossyRedis(t, counts)
	ctx := context.Background()
	for hi, hook := range []struct {
		name string
		h    redis.Hook
	}{{"no-hook", nil}, {"reading-hook", nosyHook{}}, {"marshalling-hook", nosyHook{marshal: true}}} {
		for ai, alg := range algorithms.All() {
			if !wholeMatrix() && hi > 0 && ai%2 != hi-1 {
				continue
			}
			t.Run(hook.name+"/"+string(alg), func(t *testing.T) {
				c := redis.NewClient(&redis.Options{Addr: proxyAddr})
				defer c.Close()
				if hook.h != nil {
					c.AddHook(hook.h)
				}
				prefix := "a3lost-" + hook.name + string(alg)
				l, err := algorithms.New(must(New(c, WithPrefix(prefix), WithTimeout(time.Second), WithMaxInFlight(1), WithDenialCache(0))),
					alg, algorithms.PerHour(1000))
				if err != nil {
					t.Fatal(err)
				}
				probe, err := algorithms.New(must(New(direct, WithPrefix(prefix), WithTimeout(5*time.Second))), alg, algorithms.PerHour(1000))
				if err != nil {
					t.Fatal(err)
				}
				const keys = 6
				var made [keys]int
				rng := rand.New(rand.NewPCG(3, uint64(len(alg))))
				for round := range 12 {
					if round%2 == 0 {
						direct.ScriptFlush(ctx)
					}
					counts.arm(int32(1 + rng.IntN(3)))
					n := 1 + rng.IntN(2*keys)
					var wg sync.WaitGroup
					for i := range n {
						k := (i + round) % keys
						made[k]++
						wg.Go(func() {
							res, err := l.Allow(ctx, fmt.Sprint("k", k), 1)
							if err != nil || !res.Allowed || res.Decider != algorithms.DecidedByStore {
								t.Errorf("round %d key %d: %+v, %v; want allowed by Redis", round, k, res, err)
							}
						})
					}
					wg.Wait()
					counts.arm(0)
					for k := range keys {
						if got := used(t, probe, fmt.Sprint("k", k)); got != made[k] {
							t.Fatalf("round %d, key %d: Redis counted %d of %d requests", round, k, got, made[k])
						}
					}
				}
				if counts.dropped.Load() == 0 {
					t.Fatal("no reply was lost")
				}
			})
		}
	}
}

// tokenState is a token bucket's string state as stateOf shows it.
var tokenState = regexp.MustCompile(`^string -?[0-9]+:[0-9]+$`)

// A token bucket an older script left as a hash in debt (a reservation's
// negative level) reads as that debt, not as a full bucket; and the first
// write keeps the debt, in the string state.
func TestTokenBucketHashDebtReads(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	limit := algorithms.PerHour(10)
	l, err := algorithms.New(must(New(c, WithPrefix("a3debt"), WithDenialCache(0))), algorithms.TokenBucket, limit)
	if err != nil {
		t.Fatal(err)
	}
	p := ratemath.ParamsFor(algorithms.TokenBucket, limit)
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	key := "a3debt:{k}:" + ratemath.StateName(algorithms.TokenBucket, limit)
	// Three tokens owed as of now.
	c.HSet(ctx, key, "t", -3*p.Period, "ts", now.UnixMicro()/p.Unit)
	res, err := l.Allow(ctx, "k", 1)
	if err != nil || res.Allowed || res.Decider != algorithms.DecidedByStore || res.RetryAfter < 23*time.Minute {
		t.Fatalf("%+v, %v; want a denial by Redis for about 24 minutes (4 tokens at 10/hour)", res, err)
	}
	if _, err := l.Charge(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	got := stateOf(ctx, t, c, key)
	if !tokenState.MatchString(got) || !strings.HasPrefix(got, "string -") {
		t.Fatalf("after a charge the state is %s, want the debt kept as a string", got)
	}
	if res, err := l.Allow(ctx, "k", 1); err != nil || res.Allowed {
		t.Fatalf("%+v, %v; want still denied", res, err)
	}
}

// The closed-client probe never ends the subscription of an open client:
// not while Redis is frozen (every PING times out) nor while it is down
// (every PING refused); and the subscriptions of many stores on one open
// client all end when the stores close, leaving no goroutine behind.
func TestDenialSyncProbe(t *testing.T) {
	ctx := context.Background()
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 200 * time.Millisecond})
	defer c.Close()
	const stores = 20
	var all []*Store
	for i := range stores {
		s := must(New(c, WithPrefix(fmt.Sprint("a3sync", i))))
		all = append(all, s)
		l, err := algorithms.New(s, algorithms.FixedWindow, algorithms.PerMinute(1))
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := l.Allow(ctx, "k", 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitGoroutines(t, 2*stores)
	srv.Freeze()
	time.Sleep(2500 * time.Millisecond)
	srv.Thaw()
	if n := syncGoroutines(); n != 2*stores {
		t.Fatalf("after Redis was frozen 2.5 s: %d subscription goroutines, want %d", n, 2*stores)
	}
	srv.Kill()
	time.Sleep(2500 * time.Millisecond)
	if n := syncGoroutines(); n != 2*stores {
		t.Fatalf("after Redis was down 2.5 s: %d subscription goroutines, want %d", n, 2*stores)
	}
	srv.Restart()
	for _, s := range all {
		_ = s.Close(closeCtx())
	}
	waitGoroutines(t, 0)
}
