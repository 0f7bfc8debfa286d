package redisstore

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
	"github.com/redlimit/redlimit/internal/redistest"
)

// onceLimit is high and slow enough that every request in these tests
// passes and no bucket refills a whole unit while they run.
var onceLimit = algorithms.Limit{Rate: 1000, Period: 24 * time.Hour}

// loadScripts loads the deciding scripts of l (a Redis store's limiter)
// on c's servers, so that a test counting script calls sees no NOSCRIPT
// round.
func loadScripts(t *testing.T, c redis.UniversalClient, l algorithms.RateLimiter) {
	t.Helper()
	rl := l.(*redisLimiter)
	for _, s := range []*redis.Script{rl.script, rl.scriptOne, rl.scriptBatch} {
		if s == nil {
			continue
		}
		if err := s.Load(context.Background(), c).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// used returns how many units key has consumed, read through probe, a
// limiter on a direct connection that shares the state under test.
func used(t *testing.T, probe algorithms.RateLimiter, key string) int {
	t.Helper()
	p, err := probe.Peek(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	// Peek reports what would remain after one more request.
	return p.Limit - 1 - p.Remaining
}

// lostReplies makes n requests on key, the first reply of each script call
// lost on the way back, and checks that each request counts once in Redis:
// when the client sends the call again (retries), it gets the first run's
// answer from Redis; when it does not, the request is decided locally.
func lostReplies(t *testing.T, c, direct redis.UniversalClient, counts *dropCounts, prefix string, alg algorithms.Algorithm, retries bool) {
	t.Helper()
	store := must(New(c, WithPrefix(prefix), WithTimeout(time.Second), WithDenialCache(0)))
	l, err := algorithms.New(store, alg, onceLimit)
	if err != nil {
		t.Fatal(err)
	}
	probe, err := algorithms.New(must(New(direct, WithPrefix(prefix), WithTimeout(5*time.Second))), alg, onceLimit)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// So that every call below runs its script at once.
	loadScripts(t, direct, l)
	const n = 4
	for i := range n {
		// What the store owes after a local decision is settled first,
		// and its settler stopped, so that no call of the settler's is
		// among this request's script calls nor loses the reply armed
		// for it.
		settlerStopped(t, store)
		scripts, dropped := counts.scripts.Load(), counts.dropped.Load()
		counts.arm(1)
		res, err := l.Allow(ctx, "k", 1)
		counts.arm(0)
		if err != nil {
			t.Fatal(err)
		}
		if counts.dropped.Load() != dropped+1 {
			t.Fatalf("request %d: the proxy dropped %d replies, want 1", i, counts.dropped.Load()-dropped)
		}
		sent := counts.scripts.Load() - scripts
		if got := used(t, probe, "k"); got != i+1 {
			t.Errorf("request %d (%d script calls sent, decided by %s): Redis counted %d in all, want %d",
				i, sent, res.Decider, got, i+1)
		}
		switch {
		case retries && (res.Decider != algorithms.DecidedByStore || sent != 2 || !res.Allowed):
			t.Errorf("request %d: %+v after %d script calls, want allowed by Redis after the client's retry", i, res, sent)
		case !retries && (res.Decider != algorithms.DecidedLocally || sent != 1):
			t.Errorf("request %d: %+v after %d script calls, want one call and a local decision", i, res, sent)
		}
	}
}

// settlerStopped waits until store owes Redis nothing and its settler
// has stopped. The settler keeps asking Redis whether other stores owe
// (a script call) while a key is gated, for gateGrace after its charges
// were counted: that grace is cut short here, the charges being counted.
func settlerStopped(t *testing.T, store *Store) {
	t.Helper()
	b := store.guard.batcher
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b.mu.Lock()
		owed, running := len(b.owed), b.retrying
		if owed == 0 {
			for k := range b.gates {
				b.gates[k] = time.Unix(1, 0)
			}
		}
		b.mu.Unlock()
		if owed == 0 && !running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store still owes Redis for %d keys after 5 s (its settler running: %v)", owed, running)
		}
	}
}

// A decision whose reply is lost counts once, with go-redis's retries on
// (the default) or off, with or without context timeouts on the socket.
func TestLostReplyCountsOnce(t *testing.T) {
	counts := &dropCounts{}
	proxyAddr, direct := lossyRedis(t, counts)
	clients := []struct {
		name    string
		opts    redis.Options
		hold    time.Duration // the lost reply's connection stays open so long
		retries bool
	}{
		{"default", redis.Options{}, 0, true},
		{"context-timeouts", redis.Options{ContextTimeoutEnabled: true}, 0, true},
		{"retries-10", redis.Options{MaxRetries: 10}, 0, true},
		{"no-retries", redis.Options{MaxRetries: -1}, 0, false},
		// The client gives up on its read timeout and sends the call again.
		{"read-timeout", redis.Options{ReadTimeout: 50 * time.Millisecond}, 200 * time.Millisecond, true},
	}
	for _, cl := range clients {
		for _, alg := range algorithms.All() {
			t.Run(cl.name+"/"+string(alg), func(t *testing.T) {
				counts.hold.Store(int64(cl.hold))
				opts := cl.opts
				opts.Addr = proxyAddr
				c := redis.NewClient(&opts)
				defer c.Close()
				lostReplies(t, c, direct, counts, "once-"+cl.name, alg, cl.retries)
			})
		}
	}
}

// On Cluster, go-redis sends a call again after a broken connection up to
// MaxRedirects times, whatever MaxRetries says: each request still counts
// once. A proxy sits in front of every node.
func TestClusterLostReplyCountsOnce(t *testing.T) {
	addrs := redistest.Cluster(t)
	counts := &dropCounts{}
	via := map[string]string{}
	for _, a := range addrs {
		via[a] = newDropProxy(t, a, counts).addr
	}
	var d net.Dialer
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p, ok := via[addr]; ok {
			addr = p
		}
		return d.DialContext(ctx, network, addr)
	}
	direct := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer direct.Close()
	clients := []struct {
		name string
		opts redis.ClusterOptions
	}{
		{"default", redis.ClusterOptions{}},
		{"no-retries", redis.ClusterOptions{MaxRetries: -1}},
		{"context-timeouts", redis.ClusterOptions{ContextTimeoutEnabled: true}},
	}
	for _, cl := range clients {
		for _, alg := range algorithms.All() {
			t.Run(cl.name+"/"+string(alg), func(t *testing.T) {
				opts := cl.opts
				opts.Addrs, opts.Dialer = addrs, dial
				c := redis.NewClusterClient(&opts)
				defer c.Close()
				if err := c.ForEachShard(context.Background(), func(ctx context.Context, s *redis.Client) error {
					return s.Ping(ctx).Err()
				}); err != nil {
					t.Fatal(err)
				}
				// The cluster client retries a broken connection
				// (MaxRedirects), whatever MaxRetries says.
				lostReplies(t, c, direct, counts, "once-"+cl.name, alg, true)
			})
		}
	}
}

// Requests of several keys go to Redis in one pipeline (the calls of two
// limiters, each call deciding several keys); when the pipeline's replies
// are lost and go-redis sends it again, each still counts once.
func TestLostPipelineCountsOnce(t *testing.T) {
	counts := &dropCounts{}
	counts.pipelined.Store(true)
	proxyAddr, direct := lossyRedis(t, counts)
	c := redis.NewClient(&redis.Options{Addr: proxyAddr})
	defer c.Close()
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			prefix := "pipe-" + string(alg)
			// One call in flight: the requests that arrive meanwhile go
			// together in the next round trip, a pipeline.
			store := must(New(c, WithPrefix(prefix), WithTimeout(time.Second), WithMaxInFlight(1), WithDenialCache(0)))
			var ls [2]algorithms.Limiter
			for i := range ls {
				l, err := algorithms.New(store, alg, onceLimit)
				if err != nil {
					t.Fatal(err)
				}
				ls[i] = l
			}
			probe, err := algorithms.New(must(New(direct, WithPrefix(prefix), WithTimeout(5*time.Second))), alg, onceLimit)
			if err != nil {
				t.Fatal(err)
			}
			dropped := counts.dropped.Load()
			for round := 0; counts.dropped.Load() == dropped; round++ {
				if round == 20 {
					t.Fatal("no pipeline was sent in 20 rounds")
				}
				counts.arm(1)
				var wg sync.WaitGroup
				for k := range 16 {
					wg.Go(func() {
						res, err := ls[k%2].Allow(context.Background(), fmt.Sprint("k", k), 1)
						if err != nil || res.Decider != algorithms.DecidedByStore {
							t.Errorf("key %d: %+v, %v; want a decision by Redis", k, res, err)
						}
					})
				}
				wg.Wait()
				counts.arm(0)
				for k := range 16 {
					if got := used(t, probe, fmt.Sprint("k", k)); got != round+1 {
						t.Fatalf("round %d, key %d: Redis counted %d, want %d", round, k, got, round+1)
					}
				}
			}
		})
	}
}

// Two stores, as two processes would, never give two calls one id: their
// calls under the same key and count both count, and their ids differ.
func TestCallIDsNeverShared(t *testing.T) {
	a, b := newCallIDs(), newCallIDs()
	if a.prefix == b.prefix || len(a.prefix) < 11 {
		t.Fatalf("prefixes %q and %q, want distinct, of 64 random bits", a.prefix, b.prefix)
	}
	seen := map[string]bool{}
	for range 1000 {
		for _, ids := range []*callIDs{a, b} {
			id := string(ids.appendID(nil, ids.id()))
			if seen[id] {
				t.Fatalf("id %q given twice", id)
			}
			seen[id] = true
		}
	}

	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	var limiters []algorithms.RateLimiter
	for range 2 {
		l, err := algorithms.New(must(New(c)), algorithms.FixedWindow, onceLimit)
		if err != nil {
			t.Fatal(err)
		}
		limiters = append(limiters, l)
	}
	// One limit, one request a call: each call's record stays after the
	// state it wrote, and each is a new id.
	ids := map[string]bool{}
	stores := map[string]bool{}
	for i := range 3 {
		for _, l := range limiters { // the same count in both stores
			if _, err := l.Allow(ctx, "shared", 1); err != nil {
				t.Fatal(err)
			}
			id := recordID(t, c, "rl:{shared}:"+ratemath.StateName(algorithms.FixedWindow, onceLimit))
			if ids[id] {
				t.Fatalf("call id %q given twice", id)
			}
			ids[id] = true
			store, _, _ := strings.Cut(id, ".")
			stores[store] = true
		}
		if got := used(t, limiters[0], "shared"); got != 2*(i+1) {
			t.Fatalf("after %d requests from each store Redis counted %d, want %d", i+1, got, 2*(i+1))
		}
	}
	if len(stores) != 2 {
		t.Fatalf("ids %v of %d stores, want 2", ids, len(stores))
	}
}

// recordID returns the id of the call whose record follows the state at
// key, or "" when there is none.
func recordID(t *testing.T, c *redis.Client, key string) string {
	t.Helper()
	v, err := c.Get(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	_, rec, ok := strings.Cut(v, "|")
	if !ok {
		return ""
	}
	id, reply, ok := strings.Cut(rec, " ")
	if !ok || !strings.HasPrefix(reply, "1 1 ") {
		t.Fatalf("state %q: record is not |<id> <reply>", v)
	}
	return id
}

// A call's reply is kept, briefly, only when the call consumed something:
// denials and peeks write nothing, as before.
func TestReplyKeptBriefly(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			prefix := "brief-" + string(alg)
			l, err := algorithms.New(must(New(c, WithPrefix(prefix), WithDenialCache(0))), alg, algorithms.PerMinute(2), algorithms.PerHour(5))
			if err != nil {
				t.Fatal(err)
			}
			replies := func() []string {
				t.Helper()
				keys, err := c.Keys(ctx, prefix+":{k}:once:*").Result()
				if err != nil {
					t.Fatal(err)
				}
				return keys
			}
			for i, want := range []bool{true, true, false, false} {
				before := len(replies())
				if _, err := l.Peek(ctx, "k"); err != nil {
					t.Fatal(err)
				}
				res, err := l.Allow(ctx, "k", 1)
				if err != nil || res.Allowed != want || res.Decider != algorithms.DecidedByStore {
					t.Fatalf("request %d: %+v, %v; want allowed %v by Redis", i, res, err, want)
				}
				wrote := len(replies()) - before
				if want && wrote != 1 || !want && wrote != 0 {
					t.Fatalf("request %d (allowed %v) kept %d replies", i, want, wrote)
				}
			}
			for _, k := range replies() {
				ttl := c.PTTL(ctx, k).Val()
				if ttl <= 0 || ttl > onceTTL(DefaultTimeout) {
					t.Errorf("reply %s kept for %s, want within (0, %s]", k, ttl, onceTTL(DefaultTimeout))
				}
			}
		})
	}
	if got := onceTTL(DefaultTimeout); got != 2200*time.Millisecond {
		t.Errorf("onceTTL(%s) = %s, want 2.2s", DefaultTimeout, got)
	}
	if got := onceTTL(1000 * time.Hour); got <= 0 || got > 24*time.Hour {
		t.Errorf("onceTTL(1000h) = %s, want within a day", got)
	}
}

// A Client that never sends a command again (MaxRetries -1) needs no kept
// replies: its calls carry no id, and Redis keeps nothing; any other
// client's deciding calls carry one.
func TestNoKeptRepliesWithoutResends(t *testing.T) {
	addr := redistest.Standalone(t)
	for _, tc := range []struct {
		name    string
		retries int
		kept    bool
	}{{"MaxRetries -1", -1, false}, {"default retries", 0, true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: tc.retries})
			defer c.Close()
			prefix := fmt.Sprint("resend", tc.retries)
			l, err := algorithms.New(must(New(c, WithPrefix(prefix))), algorithms.FixedWindow, algorithms.PerMinute(5))
			if err != nil {
				t.Fatal(err)
			}
			if r, err := l.Allow(context.Background(), "k", 1); err != nil || !r.Allowed || r.Decider != algorithms.DecidedByStore {
				t.Fatalf("%+v %v", r, err)
			}
			keys, err := c.Keys(context.Background(), prefix+":*once*").Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) > 0 {
				t.Errorf("kept reply keys %q: a call of one request keeps its record in the state", keys)
			}
			id := recordID(t, c, prefix+":{k}:"+ratemath.StateName(algorithms.FixedWindow, algorithms.PerMinute(5)))
			if kept := id != ""; kept != tc.kept {
				t.Errorf("record %q, want kept: %v", id, tc.kept)
			}
		})
	}
}

// A one-request call whose every reply is lost, go-redis's resends too,
// ran in Redis: the twin's admission in its stead is charged under the
// call's id, and the charge finds the call's record after the key's state
// and takes nothing, so the request counts once.
func TestLostOneRequestChargedOnce(t *testing.T) {
	counts := &dropCounts{}
	proxy, direct := lossyRedis(t, counts)
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: proxy, MaxRetries: 1})
			defer c.Close()
			prefix := "lost-one-" + string(alg)
			store := must(New(c, WithPrefix(prefix), WithTimeout(time.Second), WithDenialCache(0)))
			l, err := algorithms.New(store, alg, onceLimit)
			if err != nil {
				t.Fatal(err)
			}
			probe, err := algorithms.New(must(New(direct, WithPrefix(prefix), WithTimeout(5*time.Second))), alg, onceLimit)
			if err != nil {
				t.Fatal(err)
			}
			loadScripts(t, direct, l)
			ctx := context.Background()
			counts.arm(2) // the call and go-redis's one resend
			res, err := l.Allow(ctx, "k", 1)
			counts.arm(0)
			if err != nil || !res.Allowed || res.Decider != algorithms.DecidedLocally {
				t.Fatalf("%+v %v; want admitted locally after both replies were lost", res, err)
			}
			// The charge goes by the retrier; then Redis holds the request once.
			b := l.(*redisLimiter).guard.batcher
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				b.mu.Lock()
				owed := len(b.owed)
				b.mu.Unlock()
				if owed == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the charge was never sent")
				}
			}
			if got := used(t, probe, "k"); got != 1 {
				t.Fatalf("Redis counted %d for one request, want 1", got)
			}
		})
	}
}
