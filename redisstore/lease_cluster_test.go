package redisstore

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
)

// On a Cluster, where a lease's keys share the key's slot and renewals and
// returns go in pipelines across slots, three stores admit each key at
// most L, and exactly L once their leases are given back.
func TestLeasesOnCluster(t *testing.T) {
	addrs := redistest.Cluster(t)
	const keys, limit = 100, 32
	for _, alg := range leaseAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			var stores []*Store
			var ls []*leasedLimiter
			for range 3 {
				c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
				t.Cleanup(func() { _ = c.Close() })
				l, s := leasedOn(t, c, alg, leaseLimit(alg, limit), 30*time.Second, WithPrefix("cl-"+string(alg)),
					WithInstances(3), WithEvictionAllowed(), WithTimeout(5*time.Second), WithDenialCache(0))
				stores, ls = append(stores, s), append(ls, l)
			}
			admitted := make([]int, keys)
			for round := 0; round < 6; round++ {
				total := 0
				forEachKeyN(8, keys, func(i int) {
					n := driveUntilDenied(t, ls, keyName(i))
					admitted[i] += n
				})
				for i := range admitted {
					if admitted[i] > limit {
						t.Fatalf("key %d admitted %d, above %d", i, admitted[i], limit)
					}
					total += admitted[i]
				}
				if total == keys*limit {
					return
				}
				for _, s := range stores {
					s.leases.flush()
				}
			}
			t.Errorf("keys short of %d after the leases returned: %v", limit, admitted)
		})
	}
}
