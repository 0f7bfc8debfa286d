package ratemath

// decideSlidingWindowCounter decides a request of cost under the sliding
// window counter: a = window start, b = current count, c = previous count.
// It brings e up to now.
func (e *Entry) decideSlidingWindowCounter(now int64, p Params, cost int64) Verdict {
	if k := floorDiv(now-e.A, p.Period); k == 1 {
		e.C, e.B = e.B, 0
		e.A += p.Period
	} else if k >= 2 {
		e.C, e.B = 0, 0
	}
	if e.B == 0 && e.C == 0 {
		e.A = now
	} else if e.A > now {
		// A window that starts in the future was started by a clock
		// that was ahead: it starts now, and its counts still count.
		e.A, e.Fixed = now, true
	}
	ws, cur, prev := e.A, e.B, e.C
	el := now - ws
	used := cur + ceilDiv(prev*(p.Period-el), p.Period)
	if used+cost <= p.Rate {
		return Verdict{true, p.Rate - used - cost, 0, ws + 2*p.Period - now, 0}
	}
	reset := ws + p.Period - now
	if cur > 0 {
		reset += p.Period
	}
	var retry int64
	if room := p.Rate - cur - cost; room >= 0 {
		retry = ceilDiv(p.Period*(prev-room), prev) - el
	} else {
		room = p.Rate - cost
		var x int64
		if cur > room {
			x = ceilDiv(p.Period*(cur-room), cur)
		}
		retry = p.Period - el + x
	}
	return Verdict{false, max(p.Rate-used, 0), retry, reset, 0}
}
