package httpratecounter

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
)

// An increment whose reply is lost after Redis ran it, and which go-redis
// therefore sends again, counts once, in both modes: the script keeps its
// reply briefly under the call's id. The kept replies hold no raw key and
// expire within seconds.
func TestLostReplyCountsOnce(t *testing.T) {
	addr := redistest.Standalone(t)
	counts := &redistest.DropCounts{}
	proxy := redistest.NewDropProxy(t, addr, counts)
	direct := redis.NewClient(&redis.Options{Addr: addr})
	defer direct.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"plain", nil},
		{"strict", []Option{WithStrictLimit()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := redis.NewClient(&redis.Options{Addr: proxy.Addr})
			defer client.Close()
			prefix := "lost-" + tc.name
			c := mustNew(t, client, append([]Option{WithPrefix(prefix)}, tc.opts...)...)
			const window = time.Hour
			c.Config(100, window)
			cur := time.Now().Truncate(window)
			secret := "sk_live_" + strings.Repeat("9", 24)
			if err := c.IncrementBy(secret, cur, 1); err != nil { // loads the script
				t.Fatal(err)
			}
			for i := range 3 {
				scripts, lost := counts.Scripts(), counts.Lost()
				counts.Arm(1)
				err := c.IncrementBy(secret, cur, 2)
				counts.Arm(0)
				if err != nil {
					t.Fatal(err)
				}
				if counts.Lost() != lost+1 || counts.Scripts()-scripts != 2 {
					t.Fatalf("increment %d: %d replies lost, %d calls sent; want 1 and 2 (the resend)",
						i, counts.Lost()-lost, counts.Scripts()-scripts)
				}
				if n, _, err := c.Get(secret, cur, cur.Add(-window)); err != nil || n != 1+2*(i+1) {
					t.Fatalf("after increment %d of 2 sent twice: count %d (%v), want %d", i, n, err, 1+2*(i+1))
				}
			}
			kept := direct.Keys(ctx, prefix+":*:once:*").Val()
			if len(kept) != 4 {
				t.Errorf("kept replies %q, want one per increment: 4", kept)
			}
			for _, k := range kept {
				if ttl := direct.PTTL(ctx, k).Val(); ttl <= 0 || ttl > onceTTL(testTimeout) || strings.Contains(k, "sk_live") {
					t.Errorf("kept reply %s for %s, want no raw key and within (0, %s]", k, ttl, onceTTL(testTimeout))
				}
			}
		})
	}
}
