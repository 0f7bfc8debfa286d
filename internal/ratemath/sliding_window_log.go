package ratemath

// decideSlidingWindowLog decides a request of cost under the sliding window
// log: the times of the admissions in the window. It brings e up to now.
func (e *Entry) decideSlidingWindowLog(now int64, p Params, cost int64) Verdict {
	if e.Log.clampTo(now) {
		e.Fixed = true
	}
	e.Log.dropThrough(now - p.Period)
	count := int64(e.Log.N)
	if count+cost <= p.Rate {
		return Verdict{true, p.Rate - count - cost, 0, p.Period, 0}
	}
	need := count + cost - p.Rate
	return Verdict{false, max(p.Rate-count, 0), e.Log.at(need-1) + p.Period - now, e.Log.at(count-1) + p.Period - now, 0}
}
