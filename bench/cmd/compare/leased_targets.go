package main

import (
	"fmt"
	"strings"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/bench/internal/subjects"
)

// The leased rows' targets (redlimit issue 27), each judged on the medians
// of the same run:
//
//   - per-tenant traffic, at the reference g (50): at least 10× the
//     requests/s of go-redis/redis_rate, and the memory store's requests/s
//     at most 1.5× the leased store's;
//   - per-tenant traffic, at the lowest g (2): the memory store's
//     requests/s at most 2× the leased store's;
//   - per-client traffic, at every g: never slower than the exact Redis
//     store (leased ÷ exact requests/s at least 1).
//
// Each leased row is set against the rows of its own algorithm. A target
// whose rows refused a request or left more than maxStandInShare of their
// decisions to stand-ins is missed whatever its ratio (spoiledAt): those
// figures measure the fault path, not the store.
const (
	tenantsOverRedisRate   = 10
	tenantsMemoryOverRef   = 1.5
	tenantsMemoryOverLow   = 2
	clientsLeasedOverExact = 1
)

// leasedName, exactName and memoryName are the rows of alg.
func leasedName(alg algorithms.Algorithm) string {
	return subjects.RedlimitRedisSubject(alg, subjects.LeasedVariant).Name
}
func exactName(alg algorithms.Algorithm) string  { return subjects.RedlimitRedisSubject(alg, "").Name }
func memoryName(alg algorithms.Algorithm) string { return subjects.RedlimitSubject(alg, nil, "").Name }

// leasedRows returns the names of the leased rows f has, and each one's
// algorithm.
func leasedRows(f figures) ([]string, map[string]algorithms.Algorithm) {
	var names []string
	algs := map[string]algorithms.Algorithm{}
	for _, alg := range subjects.LeasedAlgorithms() {
		if n := leasedName(alg); f[n] != nil {
			names = append(names, n)
			algs[n] = alg
		}
	}
	return names, algs
}

// maxStandInShare is the share of a row's requests that stand-ins may
// decide before its figures stop measuring the store: 1%.
const maxStandInShare = 0.01

// spoiledAt says why the rows of names at g do not measure their stores,
// "" when they do: a request answered with another status than the
// section's (traffic below the limit: a refusal), or more than
// maxStandInShare of the requests decided by a stand-in, not by Redis.
func spoiledAt(f figures, g int, names ...string) string {
	var why []string
	for _, n := range names {
		r, ok := f[n][g]
		if !ok {
			continue
		}
		if r.Unexpected > 0 {
			why = append(why, fmt.Sprintf("%s: %s unexpected statuses", n, thousands(float64(r.Unexpected))))
		}
		if float64(r.StandIns) > maxStandInShare*float64(max(r.Served, 1)) {
			why = append(why, fmt.Sprintf("%s: %.0f%% stand-ins", n, 100*float64(r.StandIns)/float64(max(r.Served, 1))))
		}
	}
	return strings.Join(why, "; ")
}

// tenantTargets is the per-tenant section's leased rows against
// go-redis/redis_rate, the memory store and (for scale, no target) the
// exact store, at the lowest g (lo) and the reference one (ref).
func tenantTargets(f figures, lo, ref int) *table {
	names, alg := leasedRows(f)
	rps := func(name string, g int) float64 { return f.get(name, g, reqPerSec) }
	cols := []targetColumn{
		{header: fmt.Sprintf("g=%d req/s ÷ go-redis/redis_rate (≥ %d)", ref, tenantsOverRedisRate), places: 2, unit: "×", bound: tenantsOverRedisRate, target: true,
			value:   func(n string) float64 { return quotient(rps(n, ref), rps(subjects.RedisRateName, ref)) },
			spoiled: func(n string) string { return spoiledAt(f, ref, n, subjects.RedisRateName) }},
		{header: fmt.Sprintf("g=%d memory store's req/s ÷ leased (≤ %.1f)", ref, tenantsMemoryOverRef), places: 2, unit: "×", bound: tenantsMemoryOverRef, atMost: true, target: true,
			value:   func(n string) float64 { return quotient(rps(memoryName(alg[n]), ref), rps(n, ref)) },
			spoiled: func(n string) string { return spoiledAt(f, ref, n, memoryName(alg[n])) }},
		{header: fmt.Sprintf("g=%d memory store's req/s ÷ leased (≤ %d)", lo, tenantsMemoryOverLow), places: 2, unit: "×", bound: tenantsMemoryOverLow, atMost: true, target: true,
			value:   func(n string) float64 { return quotient(rps(memoryName(alg[n]), lo), rps(n, lo)) },
			spoiled: func(n string) string { return spoiledAt(f, lo, n, memoryName(alg[n])) }},
		{header: fmt.Sprintf("g=%d req/s ÷ exact store", ref), places: 2, unit: "×",
			value: func(n string) float64 { return quotient(rps(n, ref), rps(exactName(alg[n]), ref)) }},
	}
	return targetTable(names, cols)
}

// clientLeasedTargets is the compare section's leased rows against the
// exact store of their algorithm, at every g of gs.
func clientLeasedTargets(f figures, gs []int) *table {
	names, alg := leasedRows(f)
	var cols []targetColumn
	for _, g := range gs {
		cols = append(cols, targetColumn{
			header: fmt.Sprintf("g=%d req/s ÷ exact store (≥ %d.00)", g, clientsLeasedOverExact), places: 2, unit: "×", bound: clientsLeasedOverExact, target: true,
			value: func(n string) float64 {
				return quotient(f.get(n, g, reqPerSec), f.get(exactName(alg[n]), g, reqPerSec))
			},
			spoiled: func(n string) string { return spoiledAt(f, g, n, exactName(alg[n])) },
		})
	}
	return targetTable(names, cols)
}

// tenantsNote says what the per-tenant traffic is.
func tenantsNote(keys int) string {
	return fmt.Sprintf("Per-tenant traffic: the requests go round %d client IPs, which every middleware keys by, as it would by tenant; the limit is each key's, so none is refused (a refusal shows below as another status than 204). "+
		"Each measurement starts after every key was served %d times. "+
		"The leased rows use redisstore.WithLeases(%v); the sliding window log, which leases would not change, is left out.", keys, tenantWarmPasses, subjects.LeaseTTL)
}

// writeTenantTargets prints the per-tenant leased targets from the
// section's records, when it measured a leased row.
func (s *session) writeTenantTargets(recs []record, gs []int) {
	t := tenantTargets(figuresOf(recs), lowest(gs), s.ref)
	if len(t.rows) == 0 {
		return
	}
	fmt.Fprintf(s.out, "**Targets, per-tenant keys**: redlimit's leased store against go-redis/redis_rate and the memory store:\n\n")
	t.write(s.out)
	writeNotes(s.out, []string{"Ratios of the medians in the table above, each leased row against the rows of its algorithm; a target is judged on the figure as shown (✓ met, ✗ missed, – not measured: a row that -only left out), and missed whatever the figure when a row it reads refused a request or left more than 1% of its decisions to stand-ins (said in brackets)."})
}
