package ratemath

// decideTokenBucket decides a request of cost under the token bucket: a =
// tokens × period, b = time of a. It brings e up to now.
func (e *Entry) decideTokenBucket(now, nowUS int64, p Params, cost, maxDelay int64) Verdict {
	capacity := p.Burst * p.Period
	if e.B > now {
		// Stamped by a clock that was ahead: the level is as of now, and
		// refills from now.
		e.B, e.Fixed = now, true
	}
	if elapsed := now - e.B; elapsed < ceilDiv(capacity-e.A, p.Rate) {
		e.A += elapsed * p.Rate
	} else {
		e.A = capacity
	}
	e.B = now
	need := cost * p.Period
	if e.A >= need {
		left := e.A - need
		return Verdict{OK: true, Remaining: left / p.Period, Reset: ceilDiv(capacity-left, p.Rate)}
	}
	if debt := need - e.A; maxDelay > 0 {
		if v, ok := Delayed(debt, capacity, now, nowUS, p, maxDelay); ok {
			return v
		}
	}
	return Verdict{OK: false, Remaining: max(e.A, 0) / p.Period, Retry: ceilDiv(need-e.A, p.Rate), Reset: ceilDiv(capacity-e.A, p.Rate)}
}
