package memstore

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Housekeeping is done a little at a time, on the requests' path but under a
// bound: sweepChunk entries examined per request, plus at most one rebuild
// of a table's maps, which costs its live entries (a quarter of its peak at
// most, and a shard holds at most shardTarget entries).
const (
	sweepChunk   = 64
	evictSamples = 5 // entries compared to choose one to forget, as Redis samples 5
)

// housekeep advances the shard's sweep pass by one chunk, starting a pass
// when one is due. It returns the entries examined or copied. The caller
// holds sh.mu and looks nothing up before it returns.
func (sh *memoryShard) housekeep(now, interval int64) int {
	if !sh.sweeping && now < sh.nextSweep {
		return 0 // most requests: no pass runs, none is due (inlined)
	}
	return sh.housekeepPass(now, interval)
}

// housekeepPass is housekeep once a pass runs or is due.
func (sh *memoryShard) housekeepPass(now, interval int64) int {
	if now >= sh.nextSweep && (!sh.sweeping || sh.forced) {
		// A pass that makeRoom started has passed over entries that may have
		// expired since: the due pass starts over.
		sh.sweeping, sh.forced, sh.ti, sh.ei = true, false, 0, 0
	}
	if !sh.sweeping || sh.forced {
		return 0 // a pass makeRoom started advances as entries are added
	}
	work := sh.sweepStep(now, sweepChunk)
	if sh.ti >= len(sh.list) {
		sh.sweeping = false
		sh.nextSweep = now + interval
	}
	return work
}

// sweepStep examines up to budget entries from the pass's cursor, dropping
// the expired ones, and rebuilds the maps of a table it finishes if they
// have shrunk enough. It returns the entries examined or copied.
func (sh *memoryShard) sweepStep(now int64, budget int) int {
	work := 0
	for work < budget && sh.ti < len(sh.list) {
		t := sh.list[sh.ti]
		if sh.ei >= len(t.ents) {
			if t.shrinkDue() {
				work += len(t.ents)
				t.shrink()
			}
			sh.ti, sh.ei = sh.ti+1, 0
			continue
		}
		work++
		if t.expiry(sh.ei) > now {
			sh.ei++
		} else if sh.remove(t, sh.ei) {
			// The last table took t's place in the list: start on it.
			sh.ei = 0
		}
		// Otherwise the last entry took the removed one's place: examine it.
	}
	return work
}

// makeRoom frees one entry or more in a full shard: expired entries first,
// by advancing a sweep pass whether or not one is due; if that frees none,
// the entry nearest to a fresh state among a random sample.
func (sh *memoryShard) makeRoom(now int64, capacity int) {
	if !sh.sweeping {
		sh.sweeping, sh.forced, sh.ti, sh.ei = true, true, 0, 0
	}
	// A few entries per insert: a flood of new keys pays for every one.
	sh.sweepStep(now, evictSamples)
	if sh.ti >= len(sh.list) && sh.forced {
		sh.sweeping = false // nextSweep stays: the due pass still comes
	}
	if sh.count >= capacity {
		sh.evict(now, capacity)
	}
}

// evict forgets the entry, among evictSamples picked at random from the
// whole shard, whose forgetting gives its client the least (see
// forgetCost), and marks its key's slot (forgotten.go) when it still
// mattered. The caller holds sh.mu and sh.count > 0.
func (sh *memoryShard) evict(now int64, capacity int) {
	var picks [evictSamples]int
	for i := range picks {
		picks[i] = rand.IntN(sh.count)
	}
	slices.Sort(picks[:])
	var victim *table
	vj, least := -1, math.Inf(1)
	k, base := 0, 0
	for _, t := range sh.list {
		for ; k < len(picks) && picks[k] < base+len(t.ents); k++ {
			j := picks[k] - base
			if c := t.forgetCost(j, now); c < least {
				victim, vj, least = t, j, c
			}
		}
		if k == len(picks) {
			break
		}
		base += len(t.ents)
	}
	sh.forget(victim, vj, now, capacity)
}

// forget drops entry j of t, marking its key's slot (forgotten.go) when it
// still mattered: its client had used some of its quota and it would not be
// fresh yet (a forgetCost above 0). It reports whether t was dropped. The
// caller holds sh.mu.
func (sh *memoryShard) forget(t *table, j int, now int64, capacity int) (dropped bool) {
	if remaining, quota, fresh := t.standing(j, now); fresh > now && remaining < quota {
		sh.forgot.mark(t.tag(t.ents[j].key), t.spec, remaining, quota, fresh, now, capacity)
	}
	return sh.remove(t, j)
}

// forgetCost measures what a client gains if entry j is forgotten and its
// key starts afresh: the share of the quota it has used, times the µs until
// it would be fresh anyway. 0 for an expired entry.
func (t *table) forgetCost(j int, now int64) float64 {
	remaining, q, fresh := t.standing(j, now)
	if fresh <= now {
		return 0
	}
	used := q - min(max(remaining, 0), q)
	return float64(used) / float64(q) * float64(fresh-now)
}

// standing returns what entry j has left of its quota at now, the quota,
// and when (µs) it would be fresh.
func (t *table) standing(j int, now int64) (remaining, quota, fresh int64) {
	e := t.load(j)
	fresh = e.Expiry(t.alg, t.p)
	if e.Log.N > 0 {
		// decide may correct the times in place; they are shared with the
		// stored log.
		e.Log.Buf = slices.Clone(e.Log.Buf)
	}
	v := e.Decide(t.alg, now, t.p, 0, 0) // e is a copy: nothing is stored
	return v.Remaining, quotaOf(t.alg, t.p), fresh
}
