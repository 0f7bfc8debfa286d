package redisstore

import (
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// twinLimits returns the limits of a Redis limiter's local twin: each of
// limits with Rate and Burst divided by n (see WithInstances), and for each
// twin limit the position among limits of the one it answers for, so that a
// local Result's Index names a limit given to New.
//
// Division can make two distinct limits one (10/s and 11/s are both 5/s
// for two instances). The twin keeps that limit once, charged once per
// request, and answers for the tighter original, so New accepts on Redis
// exactly the limits it accepts on memory.
func twinLimits(alg algorithms.Algorithm, limits []algorithms.Limit, n int) ([]algorithms.Limit, []int) {
	var twin []algorithms.Limit
	var index []int
	at := make(map[string]int, len(limits)) // state name -> position in twin
	for i, l := range limits {
		s := shareOf(alg, l, n)
		name := ratemath.StateName(alg, s)
		j, ok := at[name]
		if !ok {
			at[name] = len(twin)
			twin, index = append(twin, s), append(index, i)
			continue
		}
		// Same state name: the same Period, so the lower rate (then the
		// smaller bucket) is the tighter original.
		if o := limits[index[j]]; l.Rate < o.Rate || l.Rate == o.Rate && l.Capacity() < o.Capacity() {
			index[j] = i
		}
	}
	return twin, index
}

// shareOf returns one instance's share of a valid limit l: Rate and Burst
// divided by n, rounded down, at least 1.
func shareOf(alg algorithms.Algorithm, l algorithms.Limit, n int) algorithms.Limit {
	if n <= 1 {
		return l
	}
	s := l
	s.Rate = max(1, l.Rate/n)
	if l.Burst > 0 {
		s.Burst = max(1, l.Burst/n)
	}
	if alg != algorithms.TokenBucket && alg != algorithms.LeakyBucket {
		return s
	}
	// Rounding can make the share's bucket refill (burst/rate periods) slower
	// than the limit's, past MaxRefill. A burst of at most
	// burst × share rate / rate keeps it no slower than the limit's (and at
	// most the divided burst); a burst of 1 refills within one Period.
	if s.Refill() == 0 {
		s.Burst = max(1, int(int64(l.Capacity())*int64(s.Rate)/int64(l.Rate)))
	}
	return s
}
