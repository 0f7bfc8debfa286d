package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
)

// An acquire whose reply is lost after Redis ran it holds no slot beyond
// its Lease. Sent again by go-redis with the same lease id, it is the same
// acquire: granted by Redis and counted once. Not sent again (MaxRetries
// -1), the local lease that stands in for it removes the lease Redis took
// when it is released. Limit 1, lease 1 h: a slot left behind would lock
// the key for the hour, and the next round would be refused.
func TestRedisConcurrencyLostReply(t *testing.T) {
	counts := &dropCounts{}
	proxyAddr, direct := lossyRedis(t, counts)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		retries int
		sent    int32 // script calls per acquire
		decider algorithms.Decider
	}{
		{"resent", 0, 2, algorithms.DecidedByStore},
		{"not-resent", -1, 1, algorithms.DecidedLocally},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: proxyAddr, MaxRetries: tc.retries})
			defer c.Close()
			prefix := "lost-" + tc.name
			l := mustConcurrency(t, New(c, WithPrefix(prefix), WithTimeout(time.Second)), 1, time.Hour)
			if err := mustAcquire(t, l, "warm").Release(ctx); err != nil { // loads the script
				t.Fatal(err)
			}
			for round := range 3 {
				scripts, dropped := counts.scripts.Load(), counts.dropped.Load()
				counts.arm(1)
				lease := mustAcquire(t, l, "k")
				counts.arm(0)
				if counts.dropped.Load() != dropped+1 {
					t.Fatalf("round %d: %d replies dropped, want 1", round, counts.dropped.Load()-dropped)
				}
				if sent := counts.scripts.Load() - scripts; !lease.Allowed || lease.Decider != tc.decider || sent != tc.sent {
					t.Fatalf("round %d: %+v after %d script calls; want allowed by %s after %d", round, lease, sent, tc.decider, tc.sent)
				}
				if tc.decider == algorithms.DecidedByStore && lease.InFlight != 1 {
					t.Errorf("round %d: in flight %d, want 1: the resent acquire counted twice", round, lease.InFlight)
				}
				if err := lease.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if keys := direct.Keys(ctx, prefix+":{k}*").Val(); len(keys) != 0 {
					t.Fatalf("round %d: %q left in Redis after the release: %v", round, keys, direct.ZRangeWithScores(ctx, keys[0], 0, -1).Val())
				}
			}
		})
	}
}
