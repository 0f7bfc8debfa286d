package algorithms

import (
	"math/bits"
	"slices"
	"time"
)

// The scripts compute in Lua numbers, IEEE doubles, which are exact
// integers only up to 2^53. Each limit is therefore given, once at New, the
// representation in which every number its algorithm computes stays within
// that bound (see paramsFor); the Go twin computes in the same one, so both
// stores give the same answers.

// params is one limit in the units the algorithms compute in.
type params struct {
	rate   int64 // the quota (window algorithms) or refill per period, reduced (buckets)
	period int64 // in units
	burst  int64 // bucket capacity, already defaulted to the Limit's Rate
	unit   int64 // µs per time unit: 1 unless µs would leave the exact range
}

// paramsFor returns the representation of l under alg: microseconds and
// the limit as given when its numbers fit, which keeps the state of every
// limit accepted before larger ones were keeps its meaning in Redis.
// Otherwise the bucket algorithms reduce rate/period by their greatest
// common divisor, and both the buckets and the sliding window counter count
// time in the smallest unit that divides the period and brings the numbers
// within range. A unit always exists: the period itself.
func paramsFor(alg Algorithm, l Limit) params {
	rate, period, burst := int64(l.Rate), l.Period.Microseconds(), int64(l.burst())
	p := params{rate: rate, period: period, burst: burst, unit: 1}
	switch alg {
	case SlidingWindowCounter:
		// It multiplies a count of at most rate by a time of at most period.
		if rate <= maxExact/period {
			return p
		}
		for _, u := range divisors(period) {
			if n := period / u; rate <= maxExact/n {
				return params{rate: rate, period: n, burst: burst, unit: u}
			}
		}
	case TokenBucket, LeakyBucket:
		// They count in 1/period of a token (of a time unit for the leaky
		// bucket's fraction), up to burst × period, and add two such numbers.
		if burst <= maxExact/2/period {
			return p
		}
		for _, u := range divisors(period) {
			n := period / u
			g := gcd(rate, n)
			if burst <= maxExact/2/(n/g) {
				return params{rate: rate / g, period: n / g, burst: burst, unit: u}
			}
		}
	}
	return p
}

// divisors returns the divisors of n > 0 in increasing order, from its
// prime factors: instant for the periods people write (a day is
// 2^13·3^3·5^8 µs), √n trial divisions, 5.6 million at most, for a prime
// number of µs; once at New, and only for limits too large for µs.
func divisors(n int64) []int64 {
	ds := []int64{1}
	add := func(p int64, k int) {
		m := len(ds)
		f := int64(1)
		for range k {
			f *= p
			for _, d := range ds[:m] {
				ds = append(ds, d*f)
			}
		}
	}
	for p := int64(2); p*p <= n; p++ {
		k := 0
		for n%p == 0 {
			n /= p
			k++
		}
		if k > 0 {
			add(p, k)
		}
	}
	if n > 1 {
		add(n, 1)
	}
	slices.Sort(ds)
	return ds
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// refillMicros is the time a bucket of l takes to refill from empty,
// Burst × Period / Rate rounded up to the µs, exact for any limit that
// Validate accepts; ok is false when it does not fit an int64.
func refillMicros(l Limit) (us int64, ok bool) {
	hi, lo := bits.Mul64(uint64(l.burst()), uint64(l.Period.Microseconds()))
	r := uint64(l.Rate)
	if hi >= r {
		return 0, false
	}
	q, rem := bits.Div64(hi, lo, r)
	if rem > 0 {
		q++
	}
	if q > 1<<62 {
		return 0, false
	}
	return int64(q), true
}

// floorDiv is a / b rounded down, as Lua's math.floor(a / b), for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// toMicros turns a duration of d time units, counted from unit time now
// (where the µs clock read nowUS), into µs: the wait until the unit that
// starts d units after now's, so that waiting it is enough and waiting one
// µs less is not. Durations of 0 stay 0.
func toMicros(d, nowUS, now, unit int64) int64 {
	if unit == 1 || d <= 0 {
		return d
	}
	return (now+d)*unit - nowUS
}

// maxRefill bounds a bucket's refill time, so that a bucket's times stay
// exact and Result durations fit a time.Duration.
const maxRefill = MaxRefill / time.Microsecond
