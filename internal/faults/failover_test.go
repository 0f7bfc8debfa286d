package faults

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// checkLimits fails the test if any key got more than rate from Redis (per
// life of its data: lives) or more than rate from the local twin.
func checkLimits(t *testing.T, s summary, keys []string, rate, lives int) {
	t.Helper()
	for _, key := range keys {
		if n := s.allowedBy(key, algorithms.DecidedByStore); n > rate*lives {
			t.Errorf("%s: Redis admitted %d, limit %d × %d lives of its data", key, n, rate, lives)
		}
		if n := s.allowedBy(key, algorithms.DecidedLocally); n > rate {
			t.Errorf("%s: %d admitted locally, local quota %d", key, n, rate)
		}
		if n := s.allowedBy(key, algorithms.DecidedFailOpen); n != 0 {
			t.Errorf("%s: %d admitted uncounted", key, n)
		}
	}
}

func someKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	return keys
}

// Redis killed mid-load and started again (empty, as a server without
// persistence comes back): decisions go on within the deadline, locally
// while it is away, and are Redis's again within a second of its return.
func TestKillAndRestart(t *testing.T) {
	const rate = 15
	keys := someKeys(8)
	for _, k := range clientKinds {
		t.Run(k.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			l := newLimiter(t, newClient(t, k, srv.Addr), rate)
			ds, ended := runLoad(l, keys, 4, 1500*time.Millisecond, func() {
				time.Sleep(300 * time.Millisecond)
				srv.Kill()
				time.Sleep(700 * time.Millisecond)
				srv.Restart()
			})
			s := summarize(ds, ended)
			s.checkCommon(t)
			checkLimits(t, s, keys, rate, 2) // the restart forgot the counts
			s.checkBackWithin(t, ended, time.Second)
		})
	}
}

// A server frozen with SIGSTOP: connections stay open and nothing answers,
// which a default client would wait out for seconds. Decisions stay within
// the deadline and are Redis's again within a second of the thaw.
func TestFrozenServer(t *testing.T) {
	const rate = 15
	keys := someKeys(8)
	for _, k := range clientKinds {
		t.Run(k.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			l := newLimiter(t, newClient(t, k, srv.Addr), rate)
			ds, ended := runLoad(l, keys, 4, 1500*time.Millisecond, func() {
				time.Sleep(300 * time.Millisecond)
				srv.Freeze()
				time.Sleep(800 * time.Millisecond)
				srv.Thaw()
			})
			s := summarize(ds, ended)
			s.checkCommon(t)
			checkLimits(t, s, keys, rate, 1)
			s.checkBackWithin(t, ended, time.Second)
		})
	}
}

// A Sentinel master killed under load, its replica promoted: the limiter
// keeps answering within its deadline throughout and returns to Redis
// after the failover.
func TestSentinelFailover(t *testing.T) {
	const rate = 15
	keys := someKeys(8)
	for _, k := range clientKinds {
		t.Run(k.name, func(t *testing.T) {
			ss := redistest.StartSentinel(t)
			o := &redis.Options{}
			k.options(o)
			client := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: ss.MasterName, SentinelAddrs: ss.Addrs,
				MaxRetries: o.MaxRetries, ContextTimeoutEnabled: o.ContextTimeoutEnabled})
			t.Cleanup(func() { _ = client.Close() })
			l := newLimiter(t, client, rate)
			var began time.Time
			ds, ended := runLoad(l, keys, 4, 3*time.Second, func() {
				time.Sleep(300 * time.Millisecond)
				began = time.Now()
				ss.Master.Kill()
				ss.WaitFailover()
			})
			t.Logf("failover took %s", ended.Sub(began).Round(time.Millisecond))
			s := summarize(ds, ended)
			s.checkCommon(t)
			// The replica holds what reached it: counts are not lost twice.
			checkLimits(t, s, keys, rate, 2)
			s.checkBackWithin(t, ended, 2*time.Second)
		})
	}
}

// A Cluster master killed under load, its replica promoted: keys in its
// slots are decided locally meanwhile, every decision within its deadline,
// and all keys return to Redis after the failover.
func TestClusterFailover(t *testing.T) {
	const rate = 15
	keys := someKeys(12) // over all three masters
	for _, k := range clientKinds {
		t.Run(k.name, func(t *testing.T) {
			cs := redistest.StartClusterWithReplicas(t)
			o := &redis.Options{}
			k.options(o)
			client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cs.Addrs, MaxRetries: o.MaxRetries,
				ContextTimeoutEnabled: o.ContextTimeoutEnabled})
			t.Cleanup(func() { _ = client.Close() })
			l := newLimiter(t, client, rate)
			var began time.Time
			ds, ended := runLoad(l, keys, 4, 3*time.Second, func() {
				time.Sleep(300 * time.Millisecond)
				began = time.Now()
				cs.Masters[0].Kill()
				cs.WaitFailover(t, cs.Masters[0])
			})
			t.Logf("failover took %s", ended.Sub(began).Round(time.Millisecond))
			s := summarize(ds, ended)
			s.checkCommon(t)
			checkLimits(t, s, keys, rate, 2)
			s.checkBackWithin(t, ended, 2*time.Second)
		})
	}
}
