//go:build scale

package redisstore

// leaseSimSizes are the leases' simulation's sizes under make test-scale:
// those of make test with more keys, and 32 instances.
func leaseSimSizes() []leaseSimSize {
	return []leaseSimSize{{n: 2, keys: 48, goroutines: 3}, {n: 8, keys: 48, goroutines: 2}, {n: 32, keys: 48, goroutines: 2}}
}

// limitsOutageKeys is TestLeasedLimitsThroughOutage's keys under make test-scale.
func limitsOutageKeys() int { return 120 }
