package algorithms

import "time"

// The Go twin of the Lua scripts in package lua, for the memory store. Each
// algorithm is a state machine over one entry: check returns a copy of the
// entry brought up to now and whether cost fits in it; commit consumes cost
// from that copy once every limit has allowed the request, and only then is
// it stored, as the scripts write nothing on a deny (starting a window on a
// deny would move it) but the correction of a time left by a clock that
// stepped back. All arithmetic is in integers, in the time unit units.go
// picks for the limit (the µs for most), in the same steps as the scripts,
// so both stores give the same answers; see the conformance and
// differential tests.

// verdict is one limit's answer, durations in µs. wait is the delay of a
// reservation the limit admits only later (see reserve.go), 0 otherwise.
type verdict struct {
	ok                      bool
	remaining, retry, reset int64
	wait                    int64
}

// entry is the state of one limit for one key, times in the limit's units.
// The fields mean, per algorithm: fixed window a = window end, b = count;
// sliding window counter a = window start, b = current count, c = previous
// count; token bucket a = tokens × period (below 0 after a reservation),
// b = time of a; leaky bucket a = whole units of the TAT, b = its fraction
// in 1/rate units, c = the backlog past the capacity that a reservation
// committed (see reserve.go). An entry
// that is not live is no state.
type entry struct {
	a, b, c int64
	log     timeLog // sliding window log
	live    bool    // false until first committed: no state, whatever the clock says
	// fixed reports that decide clamped a time that lay beyond what the
	// limit can justify, which only a clock that stepped back leaves: the
	// corrected entry is stored even when nothing is consumed, as the
	// scripts write it, so that the correction does not move with now.
	fixed bool
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// check returns whether cost fits, and e brought up to now (µs) for commit.
func (e entry) check(alg Algorithm, now int64, p params, cost int64) (verdict, entry) {
	return e.decide(alg, now, p, cost, 0), e
}

// reserve is check for a reservation: cost is admitted when it fits within
// maxDelay µs, the verdict's wait.
func (e entry) reserve(alg Algorithm, now int64, p params, cost, maxDelay int64) (verdict, entry) {
	return e.decide(alg, now, p, cost, maxDelay), e
}

// decide brings e up to now (µs) and tells whether cost fits, or fits
// within maxDelay µs for the bucket algorithms, durations in µs.
func (e *entry) decide(alg Algorithm, nowUS int64, p params, cost, maxDelay int64) verdict {
	if p.unit == 1 {
		return e.decideIn(alg, nowUS, nowUS, p, cost, maxDelay)
	}
	now := floorDiv(nowUS, p.unit)
	v := e.decideIn(alg, now, nowUS, p, cost, maxDelay)
	v.retry = toMicros(v.retry, nowUS, now, p.unit)
	v.reset = toMicros(v.reset, nowUS, now, p.unit)
	return v
}

// decideIn is decide with now and the durations in the limit's units, but
// for a reservation's wait, in µs from nowUS.
func (e *entry) decideIn(alg Algorithm, now, nowUS int64, p params, cost, maxDelay int64) verdict {
	if !e.live {
		// No state: an ended window, a full bucket, a TAT of now.
		*e = entry{live: true, a: now}
		if alg == TokenBucket {
			e.a, e.b = p.burst*p.period, now
		}
	}
	switch alg {
	case FixedWindow:
		if e.a <= now {
			e.a, e.b = now+p.period, 0
		} else if e.a > now+p.period {
			// Set by a clock that was ahead: the window ends a period from now.
			e.a, e.fixed = now+p.period, true
		}
		if e.b+cost <= p.rate {
			return verdict{true, p.rate - e.b - cost, 0, e.a - now, 0}
		}
		return verdict{false, max(p.rate-e.b, 0), e.a - now, e.a - now, 0}

	case SlidingWindowLog:
		if e.log.clampTo(now) {
			e.fixed = true
		}
		e.log.dropThrough(now - p.period)
		count := int64(e.log.n)
		if count+cost <= p.rate {
			return verdict{true, p.rate - count - cost, 0, p.period, 0}
		}
		need := count + cost - p.rate
		return verdict{false, max(p.rate-count, 0), e.log.at(need-1) + p.period - now, e.log.at(count-1) + p.period - now, 0}

	case SlidingWindowCounter:
		if k := floorDiv(now-e.a, p.period); k == 1 {
			e.c, e.b = e.b, 0
			e.a += p.period
		} else if k >= 2 {
			e.c, e.b = 0, 0
		}
		if e.b == 0 && e.c == 0 {
			e.a = now
		} else if e.a > now {
			// A window that starts in the future was started by a clock
			// that was ahead: it starts now, and its counts still count.
			e.a, e.fixed = now, true
		}
		ws, cur, prev := e.a, e.b, e.c
		el := now - ws
		used := cur + ceilDiv(prev*(p.period-el), p.period)
		if used+cost <= p.rate {
			return verdict{true, p.rate - used - cost, 0, ws + 2*p.period - now, 0}
		}
		reset := ws + p.period - now
		if cur > 0 {
			reset += p.period
		}
		var retry int64
		if room := p.rate - cur - cost; room >= 0 {
			retry = ceilDiv(p.period*(prev-room), prev) - el
		} else {
			room = p.rate - cost
			var x int64
			if cur > room {
				x = ceilDiv(p.period*(cur-room), cur)
			}
			retry = p.period - el + x
		}
		return verdict{false, max(p.rate-used, 0), retry, reset, 0}

	case TokenBucket:
		capacity := p.burst * p.period
		if e.b > now {
			// Stamped by a clock that was ahead: the level is as of now, and
			// refills from now.
			e.b, e.fixed = now, true
		}
		if elapsed := now - e.b; elapsed < ceilDiv(capacity-e.a, p.rate) {
			e.a += elapsed * p.rate
		} else {
			e.a = capacity
		}
		e.b = now
		need := cost * p.period
		if e.a >= need {
			left := e.a - need
			return verdict{ok: true, remaining: left / p.period, reset: ceilDiv(capacity-left, p.rate)}
		}
		if debt := need - e.a; maxDelay > 0 {
			if v, ok := delayed(debt, capacity, now, nowUS, p, maxDelay); ok {
				return v
			}
		}
		return verdict{ok: false, remaining: max(e.a, 0) / p.period, retry: ceilDiv(need-e.a, p.rate), reset: ceilDiv(capacity-e.a, p.rate)}

	case LeakyBucket:
		capacity, need := p.burst*p.period, cost*p.period
		if e.a < now {
			e.a, e.b, e.c = now, 0, 0
		} else if full := capacity + e.c; e.a-now > full/p.rate || (e.a-now)*p.rate+e.b > full {
			// A backlog over the capacity (and the excess reserved) was
			// left by a clock that was ahead: the bucket is full as of now.
			e.a, e.b, e.fixed = now+full/p.rate, full%p.rate, true
		}
		backlog := (e.a-now)*p.rate + e.b
		if after := backlog + need; after <= capacity {
			return verdict{ok: true, remaining: (capacity - after) / p.period, reset: ceilDiv(after, p.rate)}
		}
		if maxDelay > 0 {
			if v, ok := delayed(backlog+need-capacity, capacity, now, nowUS, p, maxDelay); ok {
				return v
			}
		}
		return verdict{ok: false, remaining: max(capacity-backlog, 0) / p.period,
			retry: ceilDiv(backlog+need-capacity, p.rate), reset: ceilDiv(backlog, p.rate)}
	}
	panic("algorithms: check called with unknown algorithm " + string(alg))
}

// commit consumes cost from an entry that check has just returned, having
// found room in it; now is in µs.
func (e *entry) commit(alg Algorithm, nowUS int64, p params, cost int64) {
	now := floorDiv(nowUS, p.unit)
	switch alg {
	case FixedWindow, SlidingWindowCounter:
		e.b += cost
	case SlidingWindowLog:
		for range cost {
			e.log.push(now)
		}
	case TokenBucket:
		e.a -= cost * p.period
	case LeakyBucket:
		after := (e.a-now)*p.rate + e.b + cost*p.period
		e.a, e.b, e.c = now+after/p.rate, after%p.rate, max(after-p.burst*p.period, 0)
	}
}

// expiry is the µs from which a committed entry means no state and may be
// dropped, as the scripts' PEXPIRE: the end of the window, or the time the
// bucket is full again. It is computed from the state rather than stored,
// which keeps a stored entry small.
func (e *entry) expiry(alg Algorithm, p params) int64 {
	return e.expiryIn(alg, p) * p.unit
}

func (e *entry) expiryIn(alg Algorithm, p params) int64 {
	switch alg {
	case FixedWindow:
		return e.a
	case SlidingWindowLog:
		// One period after the newest time, which no later than now.
		return e.log.at(int64(e.log.n)-1) + p.period
	case SlidingWindowCounter:
		return e.a + 2*p.period
	case TokenBucket:
		return e.b + ceilDiv(p.burst*p.period-e.a, p.rate)
	case LeakyBucket:
		if e.b > 0 {
			return e.a + 1 // the TAT's fraction rounds up, as ceilDiv(after, rate)
		}
		return e.a
	}
	panic("algorithms: expiry of unknown algorithm " + string(alg))
}

// binding picks the limit a decision reports, by the rule the scripts share:
// on a pass the least remaining (the later reset on a tie), on a deny the
// longest retry; the first such limit on a full tie.
type binding struct {
	allowed   bool
	pass      verdict
	deny      verdict
	passIndex int
	denyIndex int
	wait      int64 // the longest wait of the limits that reserve (µs)
}

func (b *binding) add(i int, v verdict) {
	if v.ok {
		b.wait = max(b.wait, v.wait)
		if b.passIndex < 0 || v.remaining < b.pass.remaining ||
			(v.remaining == b.pass.remaining && v.reset > b.pass.reset) {
			b.passIndex, b.pass = i, v
		}
		return
	}
	b.allowed = false
	if b.denyIndex < 0 || v.retry > b.deny.retry {
		b.denyIndex, b.deny = i, v
	}
}

func newBinding() binding { return binding{allowed: true, passIndex: -1, denyIndex: -1} }

// result turns the chosen verdict into a Result.
func (b *binding) result(alg Algorithm, limits []Limit) Result {
	if !b.allowed {
		return makeResult(alg, limits, b.denyIndex, false, b.deny.remaining, b.deny.retry, b.deny.reset)
	}
	return makeResult(alg, limits, b.passIndex, true, b.pass.remaining, b.wait, b.pass.reset)
}

// makeResult builds the Result of a decision bound by limits[i]. retryUS
// is the RetryAfter of a denial, the Delay of an admission (as the scripts
// answer).
func makeResult(alg Algorithm, limits []Limit, i int, allowed bool, remaining, retryUS, resetUS int64) Result {
	l := limits[i]
	r := Result{
		Index:      i,
		Allowed:    allowed,
		Limit:      quota(alg, l),
		Remaining:  int(max(remaining, 0)),
		ResetAfter: usToDuration(resetUS),
		Period:     window(alg, l),
	}
	if allowed {
		r.Delay = usToDuration(retryUS)
	} else {
		r.RetryAfter = usToDuration(retryUS)
	}
	return r
}

func usToDuration(us int64) time.Duration { return time.Duration(max(us, 0)) * time.Microsecond }

// timeLog is a ring of times, oldest first, that grows by doubling; in a
// steady state it allocates nothing. Copies share the ring, so only the copy
// that is stored back may push.
type timeLog struct {
	buf  []int64 // length a power of two, or 0
	head int
	n    int
}

func (l *timeLog) at(i int64) int64 { return l.buf[(l.head+int(i))&(len(l.buf)-1)] }

// clampTo moves the times after now, which only a clock that stepped back
// leaves, to now: the requests they record happened no later than now. It
// reports whether it moved any. The log stays in order.
func (l *timeLog) clampTo(now int64) bool {
	moved := false
	for i := l.n - 1; i >= 0 && l.at(int64(i)) > now; i-- {
		l.buf[(l.head+i)&(len(l.buf)-1)] = now
		moved = true
	}
	return moved
}

// dropThrough removes the times at or before cutoff.
func (l *timeLog) dropThrough(cutoff int64) {
	for l.n > 0 && l.buf[l.head] <= cutoff {
		l.head = (l.head + 1) & (len(l.buf) - 1)
		l.n--
	}
}

// push adds t, which is no earlier than any time in the log (clampTo has
// run), at the end.
func (l *timeLog) push(t int64) {
	if l.n == len(l.buf) {
		grown := make([]int64, max(4, 2*len(l.buf)))
		for i := range l.n {
			grown[i] = l.at(int64(i))
		}
		l.buf, l.head = grown, 0
	}
	l.buf[(l.head+l.n)&(len(l.buf)-1)] = t
	l.n++
}
