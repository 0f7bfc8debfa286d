package httpratecounter

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/httprate"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
)

// Behind Sentinel, through a UniversalClient: counts shared as on one
// server; while the master is gone every request is refused with 503 (the
// counter fails closed), and once Sentinel has promoted the replica the
// limiter answers again.
func TestSentinel(t *testing.T) {
	ss := redistest.StartSentinel(t)
	const window = time.Hour
	awayFromBoundary(window, time.Minute)
	client := redis.NewUniversalClient(&redis.UniversalOptions{MasterName: ss.MasterName, Addrs: ss.Addrs, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	if _, isFailover := client.(*redis.Client); !isFailover {
		t.Fatalf("UniversalClient with a master name is %T; want a failover *redis.Client", client)
	}
	c := mustNew(t, client, WithTimeout(time.Second))
	h := httprate.LimitBy(3, window, httprate.Key("k"), c.Options()...)(ok)
	for i, want := range []int{200, 200, 200, 429} {
		if got := send(h, "GET", "/", "192.0.2.1:1").code; got != want {
			t.Fatalf("request %d: %d; want %d", i+1, got, want)
		}
	}

	// Replication is asynchronous: let the replica have the count first.
	if n, err := client.Do(context.Background(), "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT = %d, %v; want the replica's acknowledgement", n, err)
	}
	ss.Master.Kill()
	if got := send(h, "GET", "/", "192.0.2.1:1").code; got != http.StatusServiceUnavailable {
		t.Fatalf("master gone: %d; want 503", got)
	}
	ss.WaitFailover()
	deadline := time.Now().Add(15 * time.Second)
	var got int
	for {
		got = send(h, "GET", "/", "192.0.2.1:1").code
		if got != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The promoted replica holds the count, so it still refuses.
	if got != http.StatusTooManyRequests {
		t.Fatalf("after failover: %d; want 429 from the promoted replica's count", got)
	}
}
