package ratemath

import (
	"slices"

	"github.com/redlimit/redlimit/algorithms"
)

// The scripts compute in Lua numbers, IEEE doubles, which are exact
// integers only up to 2^53. Each limit is therefore given, once at New, the
// representation in which every number its algorithm computes stays within
// that bound (see paramsFor); the Go twin computes in the same one, so both
// stores give the same answers.

// Params is one limit in the units the algorithms compute in.
type Params struct {
	Rate   int64 // the quota (window algorithms) or refill per period, reduced (buckets)
	Period int64 // in units
	Burst  int64 // bucket capacity, already defaulted to the Limit's Rate
	Unit   int64 // µs per time unit: 1 unless µs would leave the exact range
}

// ParamsFor returns the representation of l under alg: microseconds and
// the limit as given when its numbers fit, which keeps the state of every
// limit accepted before larger ones were keeps its meaning in Redis.
// Otherwise the bucket algorithms reduce rate/period by their greatest
// common divisor, and both the buckets and the sliding window counter count
// time in the smallest unit that divides the period and brings the numbers
// within range. A unit always exists: the period itself.
func ParamsFor(alg algorithms.Algorithm, l algorithms.Limit) Params {
	rate, period, burst := int64(l.Rate), l.Period.Microseconds(), int64(l.Capacity())
	p := Params{Rate: rate, Period: period, Burst: burst, Unit: 1}
	switch alg {
	case algorithms.SlidingWindowCounter:
		// It multiplies a count of at most rate by a time of at most period.
		if rate <= MaxExact/period {
			return p
		}
		for _, u := range Divisors(period) {
			if n := period / u; rate <= MaxExact/n {
				return Params{Rate: rate, Period: n, Burst: burst, Unit: u}
			}
		}
	case algorithms.TokenBucket, algorithms.LeakyBucket:
		// They count in 1/period of a token (of a time unit for the leaky
		// bucket's fraction), up to burst × period, and add two such numbers.
		if burst <= MaxExact/2/period {
			return p
		}
		for _, u := range Divisors(period) {
			n := period / u
			g := gcd(rate, n)
			if burst <= MaxExact/2/(n/g) {
				return Params{Rate: rate / g, Period: n / g, Burst: burst, Unit: u}
			}
		}
	}
	return p
}

// Divisors returns the Divisors of n > 0 in increasing order, from its
// prime factors: instant for the periods people write (a day is
// 2^13·3^3·5^8 µs), √n trial divisions, 5.6 million at most, for a prime
// number of µs; once at New, and only for limits too large for µs.
func Divisors(n int64) []int64 {
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

// floorDiv is a / b rounded down, as Lua's math.floor(a / b), for b > 0.
func floorDiv(a, b int64) int64 {
	if b == 1 {
		return a // the common unit, the µs: no division on a decision's path
	}
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

// MaxExact is the largest integer a Lua number (an IEEE double) holds
// exactly. The Redis scripts compute in integers up to this bound, in a
// representation chosen per limit (see paramsFor) so that they never pass
// it.
const MaxExact = 1 << 53
