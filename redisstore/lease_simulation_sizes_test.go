//go:build !scale

package redisstore

// leaseSimSizes are the leases' simulation's sizes in make test: a few
// seconds per algorithm and fault.
func leaseSimSizes() []leaseSimSize {
	return []leaseSimSize{{n: 2, keys: 12, goroutines: 3}, {n: 8, keys: 12, goroutines: 2}}
}

// limitsOutageKeys is TestLeasedLimitsThroughOutage's keys in make test.
func limitsOutageKeys() int { return 60 }
