package ratemath

import (
	"fmt"
	"strconv"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// PoliciesOf describes limits under alg.
func PoliciesOf(alg algorithms.Algorithm, limits []algorithms.Limit) []algorithms.Policy {
	ps := make([]algorithms.Policy, len(limits))
	for i, l := range limits {
		ps[i] = algorithms.Policy{Quota: QuotaOf(alg, l), Window: WindowOf(alg, l)}
	}
	return ps
}

// WindowOf is the span that quota(alg, l) refers to: see Result.Period.
func WindowOf(alg algorithms.Algorithm, l algorithms.Limit) time.Duration {
	if alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket {
		return l.Refill() // within MaxRefill: New checked
	}
	return l.Period
}

// QuotaOf is the number of units limit l holds under alg.
func QuotaOf(alg algorithms.Algorithm, l algorithms.Limit) int {
	if alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket {
		return l.Capacity()
	}
	return l.Rate
}

// CheckRequest validates the key and cost of one Allow call.
func CheckRequest(alg algorithms.Algorithm, limits []algorithms.Limit, key string, cost int) error {
	if key == "" || len(key) > algorithms.MaxKeyLength {
		return fmt.Errorf("%w: length %d, want 1 to %d bytes", algorithms.ErrInvalidKey, len(key), algorithms.MaxKeyLength)
	}
	if cost < 1 {
		return fmt.Errorf("%w: got %d", algorithms.ErrInvalidCost, cost)
	}
	for _, l := range limits {
		if q := QuotaOf(alg, l); cost > q {
			return fmt.Errorf("%w: cost %d, quota %d (%s)", algorithms.ErrCostExceedsLimit, cost, q, l)
		}
	}
	return nil
}

// StateName names the state of one limit under one algorithm: the part of a
// key after the hash tag. Window algorithms ignore Burst, so it is left out.
func StateName(alg algorithms.Algorithm, l algorithms.Limit) string {
	name := algorithmCodes[alg] + ":" + strconv.Itoa(l.Rate) + ":" + strconv.FormatInt(l.Period.Microseconds(), 10)
	if alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket {
		name += ":" + strconv.Itoa(l.Capacity())
	}
	return name
}

// ChargeArgs checks a charge's arguments and returns cost clamped to the
// limits' largest quota: no limit can take more.
func ChargeArgs(alg algorithms.Algorithm, limits []algorithms.Limit, key string, cost int) (int64, error) {
	if err := CheckRequest(alg, limits, key, 1); err != nil {
		return 0, err
	}
	if cost < 1 {
		return 0, fmt.Errorf("%w: charge of %d", algorithms.ErrInvalidCost, cost)
	}
	most := int64(0)
	for _, l := range limits {
		most = max(most, int64(QuotaOf(alg, l)))
	}
	// Twice the largest quota: no limit can take more (a full bucket goes
	// into a debt of its burst less one unit at most).
	return min(int64(cost), 2*most), nil
}

// maxRefundAge bounds the age a refund carries: longer than any period a
// limit may have (see Limit.Validate), so a longer one means the same.
const maxRefundAge = 400 * 24 * time.Hour

// RefundArgs checks a refund's arguments and returns cost, clamped to the
// limits' largest quota, and age in µs, clamped to maxRefundAge.
func RefundArgs(alg algorithms.Algorithm, limits []algorithms.Limit, key string, cost int, age time.Duration) (int64, int64, error) {
	if err := CheckRequest(alg, limits, key, 1); err != nil {
		return 0, 0, err
	}
	if cost < 1 {
		return 0, 0, fmt.Errorf("%w: refund of %d", algorithms.ErrInvalidCost, cost)
	}
	if age < 0 {
		return 0, 0, fmt.Errorf("%w: %v", algorithms.ErrInvalidAge, age)
	}
	most := 0
	for _, l := range limits {
		most = max(most, QuotaOf(alg, l))
	}
	return int64(min(cost, most)), min(age, maxRefundAge).Microseconds(), nil
}

// CheckReserve validates a reservation's algorithm and delay.
func CheckReserve(alg algorithms.Algorithm, maxDelay time.Duration) error {
	switch {
	case !alg.CanReserve():
		return fmt.Errorf("%w: %s cannot delay a request; only %s and %s can", algorithms.ErrInvalidOption, alg, algorithms.TokenBucket, algorithms.LeakyBucket)
	case maxDelay < 0 || maxDelay > algorithms.MaxDelay:
		return fmt.Errorf("%w: delay %s must be from 0 to %s", algorithms.ErrInvalidOption, maxDelay, algorithms.MaxDelay)
	}
	return nil
}

// Delayed is the verdict of a bucket that lacks excess (in 1/rate of a unit
// for the leaky bucket, of a token for the token bucket) for the request,
// when that much drains or refills within maxDelay µs: admitted, with
// nothing left and the wait in µs. ok is false when it does not, or when
// the bucket's numbers would leave the range the scripts compute exactly
// in (only for the very largest limits, whose capacity nears it already).
func Delayed(excess, capacity, now, nowUS int64, p Params, maxDelay int64) (Verdict, bool) {
	if excess > MaxExact-2*capacity {
		return Verdict{}, false
	}
	wait := toMicros(ceilDiv(excess, p.Rate), nowUS, now, p.Unit)
	if wait > maxDelay {
		return Verdict{}, false
	}
	return Verdict{OK: true, Reset: ceilDiv(capacity+excess, p.Rate), Wait: wait}, true
}

// algorithmCodes are the short names of the algorithms in Redis keys.
var algorithmCodes = map[algorithms.Algorithm]string{
	algorithms.FixedWindow:          "fw",
	algorithms.SlidingWindowLog:     "swl",
	algorithms.SlidingWindowCounter: "swc",
	algorithms.TokenBucket:          "tb",
	algorithms.LeakyBucket:          "lb",
}

// Code is alg's short name in Redis keys.
func Code(alg algorithms.Algorithm) string { return algorithmCodes[alg] }
