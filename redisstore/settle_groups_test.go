package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// The settler charges fresh charges in calls of up to settleGroupKeys
// keys, each charge counted once: a group whose reply was lost after it
// ran is settled from the reply Redis kept, without charging again; one
// that never ran is owed again and counted by the next call; under two
// limits and for each algorithm.
func TestGroupedChargesCountOnce(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	const keys, quota = 150, 10
	for _, alg := range algorithms.All() {
		for _, limits := range [][]algorithms.Limit{
			{algorithms.PerMinute(quota)},
			{algorithms.PerMinute(quota), algorithms.PerHour(5 * quota)},
		} {
			t.Run(fmt.Sprintf("%s/%d limits", alg, len(limits)), func(t *testing.T) {
				st := must(New(c, WithPrefix(fmt.Sprintf("g%s%d", alg, len(limits))), WithLogger(quietLogger()), WithTimeout(10*time.Second)))
				defer st.Close(closeCtx())
				rl, err := algorithms.New(st, alg, limits...)
				if err != nil {
					t.Fatal(err)
				}
				l, b := rl.(*redisLimiter), st.guard.batcher
				owe := func(prefix string, cost int64) {
					b.mu.Lock()
					defer b.mu.Unlock()
					b.retrying = true // no settler: the test sends
					for i := range keys {
						b.owed[queueKey{l, fmt.Sprint(prefix, i)}] = &owedCharge{cost: cost}
					}
				}
				take := func() []chargeTaken {
					b.mu.Lock()
					defer b.mu.Unlock()
					return b.takeIdleChargesLocked(settleChunk)
				}
				lose := func(calls []*scriptCall) {
					for _, call := range calls {
						cmd := redis.NewCmd(ctx)
						cmd.SetErr(context.DeadlineExceeded)
						call.cmd = cmd
					}
				}
				resolve := func() {
					b.mu.Lock()
					asks := b.takeGroupDoubtsLocked(settleChunk)
					b.mu.Unlock()
					if len(asks) != keys {
						t.Fatalf("%d doubts to ask about, want %d", len(asks), keys)
					}
					if !b.resolveGroups(b.callContext(), asks) {
						t.Fatal("Redis did not answer the reads of the kept replies")
					}
				}
				// Ran, reply lost: settled from the kept reply.
				owe("ran", 3)
				taken := take()
				calls, parts := groupedChargeCalls(taken)
				if want := (keys + settleGroupKeys - 1) / settleGroupKeys; len(calls) != want {
					t.Fatalf("%d calls for %d fresh charges, want %d", len(calls), keys, want)
				}
				_ = runCalls(ctx, c, calls)
				lose(calls)
				if b.settleParts(taken, parts) {
					t.Fatal("calls whose replies were lost reported counted")
				}
				resolve()
				// Never ran: owed again, then counted by the next call.
				owe("lost", 2)
				taken = take()
				calls, parts = groupedChargeCalls(taken)
				lose(calls)
				b.settleParts(taken, parts)
				resolve()
				if taken = take(); len(taken) != keys || taken[0].cost != 2 {
					t.Fatalf("%d charges owed again (first %+v), want %d of 2", len(taken), taken[0], keys)
				}
				calls, parts = groupedChargeCalls(taken)
				_ = runCalls(ctx, c, calls)
				if !b.settleParts(taken, parts) {
					t.Fatal("the second sending failed")
				}
				if n := owedKeys(st); n != 0 {
					t.Fatalf("%d keys still owe", n)
				}
				for prefix, charged := range map[string]int{"ran": 3, "lost": 2} {
					for i := range keys {
						r, err := rl.Peek(ctx, fmt.Sprint(prefix, i))
						if err != nil {
							t.Fatal(err)
						}
						if want := quota - charged - 1; r.Remaining != want {
							t.Fatalf("%s%d: remaining %d after a request of 1, want %d: charged %d times over",
								prefix, i, r.Remaining, want, (quota-1-r.Remaining)/charged)
						}
					}
				}
			})
		}
	}
}
