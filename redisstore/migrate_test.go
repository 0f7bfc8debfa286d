package redisstore

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// keyInSlot returns a key of prefix whose hash tag lies in slot.
func keyInSlot(prefix string, slot int) string {
	for i := 0; ; i++ {
		if k := prefix + strconv.Itoa(i); clusterSlot(k) == slot {
			return k
		}
	}
}

// While a Cluster slot migrates (MIGRATING on its owner, IMPORTING on the
// target), Redis decides its keys and counts each request once: a key whose
// state is still on the source, one whose state has moved to the target,
// a new key (created on the target), and keys of that slot decided with
// others in one pipeline. Only the first call finds out that the slot
// migrates; the calls after it are sent as Redis can serve them at once.
func TestClusterMigratingSlotDecidedByRedis(t *testing.T) {
	addrs := redistest.Cluster(t)
	const rate = 5
	for _, tc := range []struct {
		name      string
		before    bool // decide once before the migration: state on the source
		move      bool // then move the key's state to the target
		pipelined bool // decide with keys of other slots in one pipeline
		limits    []algorithms.Limit
	}{
		{name: "state on the source", before: true},
		// Both limits' states on one node: Redis still serves the call.
		{name: "two limits on the source", before: true, limits: []algorithms.Limit{algorithms.PerMinute(rate), algorithms.PerHour(100)}},
		{name: "two limits moved to the target", before: true, move: true, limits: []algorithms.Limit{algorithms.PerMinute(rate), algorithms.PerHour(100)}},
		{name: "state moved to the target", before: true, move: true},
		{name: "new key", before: false},
		{name: "pipeline", before: true, pipelined: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, tryAgains := redistest.TryAgainClient(t, addrs)
			ctx := context.Background()
			prefix := "mig" + strings.ReplaceAll(tc.name, " ", "")
			limits := tc.limits
			if limits == nil {
				limits = []algorithms.Limit{algorithms.PerMinute(rate)}
			}
			// A deadline long enough for the first call, which finds out
			// through go-redis's redirections and backoff.
			l, err := algorithms.New(must(New(c, WithPrefix(prefix), WithTimeout(2*time.Second), WithDenialCache(0),
				WithLogger(quietLogger()))), algorithms.FixedWindow, limits...)
			if err != nil {
				t.Fatal(err)
			}
			key := "k-" + prefix
			admitted := 0
			if tc.before {
				res, err := l.Allow(ctx, key, 1)
				if err != nil || !res.Allowed || res.Decider != algorithms.DecidedByStore {
					t.Fatalf("before the migration: %+v, %v", res, err)
				}
				admitted++
			}
			m := redistest.MigrateSlot(t, addrs, clusterSlot(key))
			if tc.move {
				m.MoveKeys(t, prefix+":{"+key+"}*")
			}
			keys := []string{key}
			if tc.pipelined {
				// Another key of the slot, new, decided in the same call,
				// and keys of other slots beside it.
				keys = append(keys, keyInSlot("same-", m.Slot), "other-a", "other-b")
			}
			count := make([]int, len(keys))
			count[0] = admitted
			for round := range rate + 2 {
				start := time.Now()
				results, errs := decideAll(ctx, l.(*redisLimiter), keys)
				for i, res := range results {
					if errs[i] != nil || res.Decider != algorithms.DecidedByStore {
						t.Fatalf("round %d, key %s: %+v, %v; want decided by Redis", round, keys[i], res, errs[i])
					}
					if res.Allowed {
						count[i]++
					}
				}
				if round < 2 {
					t.Logf("round %d took %v", round, time.Since(start).Round(time.Microsecond))
				}
				if round == 0 {
					tryAgains.Reset()
				}
			}
			for i, n := range count {
				if n != rate {
					t.Errorf("key %s: %d admitted, want %d", keys[i], n, rate)
				}
			}
			if n := tryAgains.Count(); n != 0 {
				t.Errorf("%d TRYAGAIN replies after the first round: the calls kept sending the exactly-once key", n)
			}
		})
	}
}

// decideAll decides one request of each key: through Allow for one key, in
// one flush (one pipeline, the keys of a slot in one call) for several.
func decideAll(ctx context.Context, l *redisLimiter, keys []string) ([]algorithms.Result, []error) {
	results, errs := make([]algorithms.Result, len(keys)), make([]error, len(keys))
	if len(keys) == 1 {
		results[0], errs[0] = l.Allow(ctx, keys[0], 1)
		return results, errs
	}
	jobs := make([]*job, len(keys))
	for i, k := range keys {
		jobs[i] = &job{l: l, key: k, costs: []int{1}}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = run(ctx, jobs, nil)
	for i, j := range jobs {
		errs[i] = j.err
		if j.err == nil {
			results[i] = j.results[0]
		}
	}
	return results, errs
}
