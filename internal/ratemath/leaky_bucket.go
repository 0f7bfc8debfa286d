package ratemath

// decideLeakyBucket decides a request of cost under the leaky bucket (GCRA):
// a = whole units of the TAT, b = its fraction, c = the backlog a
// reservation committed past the capacity. It brings e up to now.
func (e *Entry) decideLeakyBucket(now, nowUS int64, p Params, cost, maxDelay int64) Verdict {
	capacity, need := p.Burst*p.Period, cost*p.Period
	if e.A < now {
		e.A, e.B, e.C = now, 0, 0
	} else if full := capacity + e.C; e.A-now > full/p.Rate || (e.A-now)*p.Rate+e.B > full {
		// A backlog over the capacity (and the excess reserved) was
		// left by a clock that was ahead: the bucket is full as of now.
		e.A, e.B, e.Fixed = now+full/p.Rate, full%p.Rate, true
	}
	backlog := (e.A-now)*p.Rate + e.B
	if after := backlog + need; after <= capacity {
		return Verdict{OK: true, Remaining: (capacity - after) / p.Period, Reset: ceilDiv(after, p.Rate)}
	}
	if maxDelay > 0 {
		if v, ok := Delayed(backlog+need-capacity, capacity, now, nowUS, p, maxDelay); ok {
			return v
		}
	}
	return Verdict{OK: false, Remaining: max(capacity-backlog, 0) / p.Period,
		Retry: ceilDiv(backlog+need-capacity, p.Rate), Reset: ceilDiv(backlog, p.Rate)}
}
