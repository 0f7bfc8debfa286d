package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// The lease worker's pipelines go through sendPipelined too: after Redis
// lost its scripts, a busy key's renewals are refused (NOSCRIPT, not run)
// and sent again with the script's source, and the key goes on deciding
// from its leases, each request counted once (TestPipelineReloadsScripts
// is the batches' side).
func TestLeaseRenewalsReloadScripts(t *testing.T) {
	addr := redistest.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	counter := &tripCounter{pipelineCmds: map[string]int{}}
	c.AddHook(counter)
	const quota = 1000
	l, _ := leasedOn(t, c, algorithms.FixedWindow, algorithms.Limit{Rate: quota, Period: time.Hour}, time.Minute)
	sent := 0
	allow := func() {
		sent++
		if !leaseAllowed(t, l, "k") {
			t.Fatalf("request %d refused", sent)
		}
		waitUnseeking(t, l, "k")
	}
	for range 4 { // the key's first request is exact, its next ones lease
		allow()
	}
	if err := c.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	counter.mu.Lock()
	clear(counter.pipelineCmds)
	counter.mu.Unlock()
	for range 60 {
		allow()
	}
	counter.mu.Lock()
	refused, resent := counter.pipelineCmds["evalsha"], counter.pipelineCmds["eval"]
	counter.mu.Unlock()
	if refused < 1 || resent < 1 {
		t.Fatalf("pipelined commands after SCRIPT FLUSH: %d EVALSHA, %d EVAL; want a renewal refused, then sent with its source", refused, resent)
	}
	units, _ := leaseUnits(l, "k")
	p, err := l.redisLimiter.Peek(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	// Redis counts what was admitted plus what the instance holds: each
	// unit once (Peek answers for one more request).
	if counted := p.Limit - 1 - p.Remaining; counted != sent+units {
		t.Errorf("Redis counted %d, want the %d admitted plus the %d units held", counted, sent, units)
	}
}
