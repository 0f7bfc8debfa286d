//go:build !scale

package redisstore

import "github.com/redlimit/redlimit/algorithms"

// leaseLimitsAttackSizes are TestLeasedLimitsAttack's sizes in make test,
// a few seconds: 2,000 identities under the fixed window.
func leaseLimitsAttackSizes() []leaseLimitsAttack {
	return []leaseLimitsAttack{{keys: 2_000, algs: []algorithms.Algorithm{algorithms.FixedWindow}}}
}
