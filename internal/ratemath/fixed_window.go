package ratemath

// decideFixedWindow decides a request of cost under the fixed window: a =
// window end, b = count. It brings e up to now.
func (e *Entry) decideFixedWindow(now int64, p Params, cost int64) Verdict {
	if e.A <= now {
		e.A, e.B = now+p.Period, 0
	} else if e.A > now+p.Period {
		// Set by a clock that was ahead: the window ends a period from now.
		e.A, e.Fixed = now+p.Period, true
	}
	if e.B+cost <= p.Rate {
		return Verdict{true, p.Rate - e.B - cost, 0, e.A - now, 0}
	}
	return Verdict{false, max(p.Rate-e.B, 0), e.A - now, e.A - now, 0}
}
