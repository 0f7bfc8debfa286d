package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
)

// An acquire whose reply is lost after Redis ran it holds no slot beyond
// its Lease. Sent again by go-redis with the same lease id, it is the same
// acquire: granted by Redis and counted once. Not sent again (MaxRetries
// -1), the lease Redis took is removed by the release line. Either way a
// tombstone that expires soon is all it leaves. Limit 1, lease 1 h: a slot
// left behind would lock the key for the hour, and the next round would be
// refused.
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
			l := mustConcurrency(t, must(New(c, WithPrefix(prefix), WithTimeout(time.Second))), 1, time.Hour)
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
				set := prefix + ":{k}:cc"
				if held := leasesGone(t, direct, set, time.Second); len(held) != 0 {
					t.Fatalf("round %d: %v left in Redis a second after the release", round, held)
				}
				for _, k := range direct.Keys(ctx, prefix+":{k}*").Val() {
					if ttl := direct.PTTL(ctx, k).Val(); !strings.HasPrefix(k, set+":") || ttl <= 0 || ttl > onceTTL(time.Second) {
						t.Errorf("round %d: %q left in Redis for %s, want only tombstones, for at most %s", round, k, ttl, onceTTL(time.Second))
					}
				}
			}
		})
	}
}
