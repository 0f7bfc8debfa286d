package redisstore

import (
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// leaseLimitsAttack is one size of TestLeasedLimitsAttack: how many
// identities, under which algorithms.
type leaseLimitsAttack struct {
	keys int
	algs []algorithms.Algorithm
}

// leaseLimitsAttackTight is TestLeasedLimitsAttack's tightest quota: small,
// so that tens of thousands of identities each past it cost a few
// hundred thousand requests.
const leaseLimitsAttackTight = 4

// An attack at scale on a limiter of two limits: tens of thousands of
// identities under make test-scale (thousands in make test), each sending twice its tightest quota from 16 goroutines to
// three stores on separate clients, the second limit taken down to a
// quarter for the odd identities so that each limit binds for half of
// them. Every identity is admitted at most what each of its limits has
// left, checked identity by identity.
func TestLeasedLimitsAttack(t *testing.T) {
	addr := redistest.Standalone(t)
	const tight, goroutines, ttl = leaseLimitsAttackTight, 16, 30 * time.Second
	for _, size := range leaseLimitsAttackSizes() {
		for _, alg := range size.algs {
			t.Run(string(alg), func(t *testing.T) {
				prefix := "plattack-" + string(alg)
				limits := twoLimits(alg, tight)
				probes := limitProbes(t, addr, prefix, alg, limits)
				takePreUsed(t, probes, limits, size.keys)
				_, ls := leasedLimitsStores(t, addr, 3, alg, limits, ttl, WithPrefix(prefix))
				admitted, span := limitsAttack(t, ls, size.keys, 2*tight, goroutines)
				worst := checkLimitsBound(t, alg, limits, admitted, span+ttl)
				t.Logf("%d identities × 2 limits × 3 stores in %s: the largest admitted less its bound %d",
					size.keys, span.Round(time.Millisecond), worst)
			})
		}
	}
}
