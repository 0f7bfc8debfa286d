//go:build scale

package redisstore

import "github.com/redlimit/redlimit/algorithms"

// leaseLimitsAttackSizes are TestLeasedLimitsAttack's sizes under make
// test-scale: 20,000 identities under a window and a bucket.
func leaseLimitsAttackSizes() []leaseLimitsAttack {
	return []leaseLimitsAttack{{keys: 20_000, algs: []algorithms.Algorithm{algorithms.FixedWindow, algorithms.TokenBucket}}}
}
