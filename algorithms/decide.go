package algorithms

import "time"

// The Go twin of the Lua scripts in package lua, for the memory store. Each
// algorithm is a state machine over one entry: check returns a copy of the
// entry brought up to now and whether cost fits in it; commit consumes cost
// from that copy once every limit has allowed the request, and only then is
// it stored, as the scripts write nothing on a deny (starting a window on a
// deny would move it). All arithmetic is in integer microseconds, in the
// same steps as the scripts, so both stores give the same answers; see the
// conformance and differential tests.

// params is one limit in the units the algorithms compute in.
type params struct {
	rate   int64
	period int64 // µs
	burst  int64 // bucket capacity, already defaulted to rate
}

func paramsOf(l Limit) params {
	return params{rate: int64(l.Rate), period: l.Period.Microseconds(), burst: int64(l.burst())}
}

// verdict is one limit's answer, durations in µs.
type verdict struct {
	ok                      bool
	remaining, retry, reset int64
}

// entry is the state of one limit for one key. The fields mean, per
// algorithm: fixed window a = window end, b = count; sliding window counter
// a = window start, b = current count, c = previous count; token bucket
// a = tokens × period, b = time of a; leaky bucket a = whole µs of the TAT,
// b = its fraction in 1/rate µs. An entry that is not live is no state.
type entry struct {
	a, b, c int64
	log     timeLog // sliding window log
	live    bool    // false until first committed: no state, whatever the clock says
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// check returns whether cost fits, and e brought up to now for commit.
func (e entry) check(alg Algorithm, now int64, p params, cost int64) (verdict, entry) {
	return e.decide(alg, now, p, cost), e
}

// decide brings e up to now and tells whether cost fits.
func (e *entry) decide(alg Algorithm, now int64, p params, cost int64) verdict {
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
		}
		if e.b+cost <= p.rate {
			return verdict{true, p.rate - e.b - cost, 0, e.a - now}
		}
		return verdict{false, max(p.rate-e.b, 0), e.a - now, e.a - now}

	case SlidingWindowLog:
		e.log.dropThrough(now - p.period)
		count := int64(e.log.n)
		if count+cost <= p.rate {
			return verdict{true, p.rate - count - cost, 0, p.period}
		}
		need := count + cost - p.rate
		return verdict{false, max(p.rate-count, 0), e.log.at(need-1) + p.period - now, e.log.at(count-1) + p.period - now}

	case SlidingWindowCounter:
		if k := (now - e.a) / p.period; k == 1 {
			e.c, e.b = e.b, 0
			e.a += p.period
		} else if k >= 2 {
			e.c, e.b = 0, 0
		}
		if e.b == 0 && e.c == 0 {
			e.a = now
		}
		ws, cur, prev := e.a, e.b, e.c
		el := max(now-ws, 0) // a clock that went back stays at the window start
		used := cur + ceilDiv(prev*(p.period-el), p.period)
		if used+cost <= p.rate {
			return verdict{true, p.rate - used - cost, 0, ws + 2*p.period - now}
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
		return verdict{false, max(p.rate-used, 0), retry, reset}

	case TokenBucket:
		capacity := p.burst * p.period
		if elapsed := max(now-e.b, 0); elapsed < ceilDiv(capacity-e.a, p.rate) {
			e.a += elapsed * p.rate
		} else {
			e.a = capacity
		}
		e.b = max(now, e.b) // a clock that went back must not refill twice
		need := cost * p.period
		if e.a >= need {
			left := e.a - need
			return verdict{true, left / p.period, 0, ceilDiv(capacity-left, p.rate)}
		}
		return verdict{false, e.a / p.period, ceilDiv(need-e.a, p.rate), ceilDiv(capacity-e.a, p.rate)}

	case LeakyBucket:
		if e.a < now {
			e.a, e.b = now, 0
		}
		backlog := (e.a-now)*p.rate + e.b
		capacity, need := p.burst*p.period, cost*p.period
		if after := backlog + need; after <= capacity {
			return verdict{true, (capacity - after) / p.period, 0, ceilDiv(after, p.rate)}
		}
		// After the clock went back the backlog can exceed the capacity.
		return verdict{false, max(capacity-backlog, 0) / p.period, ceilDiv(backlog+need-capacity, p.rate), ceilDiv(backlog, p.rate)}
	}
	panic("algorithms: check called with unknown algorithm " + string(alg))
}

// commit consumes cost from an entry that check has just returned, having
// found room in it.
func (e *entry) commit(alg Algorithm, now int64, p params, cost int64) {
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
		e.a, e.b = now+after/p.rate, after%p.rate
	}
}

// expiry is the µs from which a committed entry means no state and may be
// dropped, as the scripts' PEXPIRE: the end of the window, or the time the
// bucket is full again. It is computed from the state rather than stored,
// which keeps a stored entry small.
func (e *entry) expiry(alg Algorithm, p params) int64 {
	switch alg {
	case FixedWindow:
		return e.a
	case SlidingWindowLog:
		// The latest time: the one commit pushed, or a later one after the
		// clock went back, so never sooner than the script's expiry.
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
}

func (b *binding) add(i int, v verdict) {
	if v.ok {
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
	i, v := b.passIndex, b.pass
	if !b.allowed {
		i, v = b.denyIndex, b.deny
	}
	return makeResult(alg, limits, i, b.allowed, v.remaining, v.retry, v.reset)
}

// makeResult builds the Result of a decision bound by limits[i].
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
	if !allowed {
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

// dropThrough removes the times at or before cutoff.
func (l *timeLog) dropThrough(cutoff int64) {
	for l.n > 0 && l.buf[l.head] <= cutoff {
		l.head = (l.head + 1) & (len(l.buf) - 1)
		l.n--
	}
}

// push adds t in time order, as Redis's sorted set keeps it: at the end,
// unless the clock went back.
func (l *timeLog) push(t int64) {
	if l.n == len(l.buf) {
		grown := make([]int64, max(4, 2*len(l.buf)))
		for i := range l.n {
			grown[i] = l.at(int64(i))
		}
		l.buf, l.head = grown, 0
	}
	mask := len(l.buf) - 1
	i := l.n
	for ; i > 0 && l.buf[(l.head+i-1)&mask] > t; i-- {
		l.buf[(l.head+i)&mask] = l.buf[(l.head+i-1)&mask]
	}
	l.buf[(l.head+i)&mask] = t
	l.n++
}
