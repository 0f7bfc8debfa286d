package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/internal/redistest"
)

// The conformance suite (package storetest) on the Redis store: on
// miniredis with its clock set, and on a real server and a Cluster in real
// time.

const ms = time.Millisecond

// start is a fixed, whole-second instant for the fake clocks.
var start = time.Unix(1_800_000_000, 0)

var prefixes atomic.Int64

func TestConformanceMiniredis(t *testing.T) {
	storetest.RunClocked(t, func(t *testing.T) (algorithms.Store, func(time.Duration)) {
		m := miniredis.RunT(t)
		m.SetTime(start)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { c.Close() })
		var last time.Duration
		// The denial cache is off, and the deadline out of reach of a loaded
		// machine: these sequences test the scripts.
		return must(New(c, WithDenialCache(0), WithTimeout(time.Minute))), func(at time.Duration) {
			// TIME follows SetTime; key expiry follows FastForward: move both.
			m.SetTime(start.Add(at))
			m.FastForward(at - last)
			last = at
		}
	})
}

// realStore makes a store on a real server in real time: each run of a
// sequence gets its own prefix.
func realStore(client func(t *testing.T) redis.UniversalClient) func(t *testing.T) algorithms.Store {
	return func(t *testing.T) algorithms.Store {
		c := client(t)
		// The first command of a client dials (and a cluster client learns
		// the slots); do that before the clock starts.
		if err := c.Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		return must(New(c, WithPrefix(fmt.Sprintf("conf%d", prefixes.Add(1))), WithDenialCache(0)))
	}
}

func TestConformanceRedis(t *testing.T) {
	addr := redistest.Standalone(t)
	storetest.Run(t, realStore(func(t *testing.T) redis.UniversalClient {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		return c
	}))
}

func TestConformanceCluster(t *testing.T) {
	addrs := redistest.Cluster(t)
	storetest.Run(t, realStore(func(t *testing.T) redis.UniversalClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		t.Cleanup(func() { c.Close() })
		return c
	}))
}
