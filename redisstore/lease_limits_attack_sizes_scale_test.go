//go:build scale

package redisstore

// leaseLimitsAttackSizes are TestLeasedLimitsAttack's sizes under make
// test-scale: 20,000 identities under every leased algorithm.
func leaseLimitsAttackSizes() []leaseLimitsAttack {
	return []leaseLimitsAttack{{keys: 20_000, algs: leaseAlgorithms}}
}
