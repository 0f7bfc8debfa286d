package redisstore

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// The attack that makes an evicting Redis untrusted: allkeys-lru with a
// small maxmemory, a client exhausted at 10/hour, then a flood of 40,000
// new identities. By default the store does not let that Redis decide, and
// the exhausted client stays at 10. With WithEvictionAllowed the flood
// evicts the client's state and it is admitted 10 more: the risk that
// option accepts, and the proof that the flood does evict. The denial
// cache is off, as on an instance that has not seen the client's denials
// (another one, or a restarted one): it is not what holds the limit.
func TestEvictionFloodKeepsExhaustedClient(t *testing.T) {
	tests := []struct {
		name      string
		opts      []Option
		wantFirst algorithms.Decider
		evicted   bool // the flood gives the client its quota again
	}{
		{"default", nil, algorithms.DecidedLocally, false},
		{"WithEvictionAllowed", []Option{WithEvictionAllowed()}, algorithms.DecidedByStore, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := smallEvictingRedis(t)
			st := must(New(c, append(tt.opts, WithLogger(quietLogger()), WithDenialCache(0))...))
			t.Cleanup(func() { _ = st.Close(closeCtx()) })
			awaitEvictionRead(t, st)
			l := mustNew(t, st, algorithms.FixedWindow, algorithms.PerHour(10))
			if got := deciderOf(t, l, "victim"); got != tt.wantFirst {
				t.Fatalf("first request decided by %v, want %v", got, tt.wantFirst)
			}
			admitted := 1 + allowed(t, l, "victim", 14)
			if admitted != 10 {
				t.Fatalf("admitted %d of 15 before the flood, want 10", admitted)
			}
			flood(t, l, 40_000)
			admitted += allowed(t, l, "victim", 15)
			t.Logf("the exhausted client was admitted %d in all", admitted)
			if tt.evicted && admitted <= 10 {
				t.Fatalf("with eviction allowed, admitted %d after the flood: the flood evicted nothing, so this test proves nothing", admitted)
			}
			if !tt.evicted && admitted != 10 {
				t.Fatalf("admitted %d in all, want 10: the flood gave the exhausted client its quota again", admitted)
			}
		})
	}
}

// smallEvictingRedis is a client of a fresh server with allkeys-lru and a
// maxmemory 2 MB above what it uses empty: about 10,000 identities' state.
func smallEvictingRedis(t *testing.T) *redis.Client {
	t.Helper()
	srv := redistest.StartServerWith(t, "--maxmemory-policy", "allkeys-lru")
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	limit := usedMemory(t, c) + 2<<20
	if err := c.ConfigSet(context.Background(), "maxmemory", strconv.FormatInt(limit, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	return c
}

// usedMemory is the server's used_memory.
func usedMemory(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}

// allowed is how many of n requests for key l admits.
func allowed(t *testing.T, l algorithms.Limiter, key string, n int) int {
	t.Helper()
	admitted := 0
	for range n {
		res, err := l.Allow(context.Background(), key, 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			admitted++
		}
	}
	return admitted
}

// flood sends one request for each of n new identities, from 32 goroutines:
// enough for the store to send them in pipelines of many keys.
func flood(t *testing.T, l algorithms.Limiter, n int) {
	t.Helper()
	const workers = 32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if _, err := l.Allow(context.Background(), "flood-"+strconv.Itoa(i), 1); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
