// Package ratemath is the arithmetic the stores share: the Go twin of the
// Lua scripts (the Entry state machine of the five algorithms, in the units
// of Params), and the checks and shapes of requests and results that every
// store applies alike. It holds no state and knows no store.
package ratemath

import (
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

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

// Verdict is one limit's answer, durations in µs. wait is the delay of a
// reservation the limit admits only later (see reserve.go), 0 otherwise.
type Verdict struct {
	OK                      bool
	Remaining, Retry, Reset int64
	Wait                    int64
}

// Entry is the state of one limit for one key, times in the limit's units.
// The fields mean, per algorithm: fixed window a = window end, b = count;
// sliding window counter a = window start, b = current count, c = previous
// count; token bucket a = tokens × period (below 0 after a reservation),
// b = time of a; leaky bucket a = whole units of the TAT, b = its fraction
// in 1/rate units, c = the backlog past the capacity that a reservation
// committed (see reserve.go). An Entry
// that is not live is no state.
type Entry struct {
	A, B, C int64
	Log     TimeLog // sliding window log
	Live    bool    // false until first committed: no state, whatever the clock says
	// Fixed reports that decide clamped a time that lay beyond what the
	// limit can justify, which only a clock that stepped back leaves: the
	// corrected entry is stored even when nothing is consumed, as the
	// scripts write it, so that the correction does not move with now.
	Fixed bool
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// Check returns whether cost fits, and e brought up to now (µs) for commit.
func (e Entry) Check(alg algorithms.Algorithm, now int64, p Params, cost int64) (Verdict, Entry) {
	return e.Decide(alg, now, p, cost, 0), e
}

// Reserve is check for a reservation: cost is admitted when it fits within
// maxDelay µs, the verdict's wait.
func (e Entry) Reserve(alg algorithms.Algorithm, now int64, p Params, cost, maxDelay int64) (Verdict, Entry) {
	return e.Decide(alg, now, p, cost, maxDelay), e
}

// Decide brings e up to now (µs) and tells whether cost fits, or fits
// within maxDelay µs for the bucket algorithms, durations in µs. It is one
// call deep on the memory store's path, and divides only for a limit that
// counts time in a unit other than the µs.
func (e *Entry) Decide(alg algorithms.Algorithm, nowUS int64, p Params, cost, maxDelay int64) Verdict {
	now := nowUS
	if p.Unit != 1 {
		now = floorDiv(nowUS, p.Unit)
	}
	if !e.Live {
		// No state: an ended window, a full bucket, a TAT of now.
		*e = Entry{Live: true, A: now}
		if alg == algorithms.TokenBucket {
			e.A, e.B = p.Burst*p.Period, now
		}
	}
	var v Verdict
	switch alg {
	case algorithms.FixedWindow:
		v = e.decideFixedWindow(now, p, cost)
	case algorithms.SlidingWindowLog:
		v = e.decideSlidingWindowLog(now, p, cost)
	case algorithms.SlidingWindowCounter:
		v = e.decideSlidingWindowCounter(now, p, cost)
	case algorithms.TokenBucket:
		v = e.decideTokenBucket(now, nowUS, p, cost, maxDelay)
	case algorithms.LeakyBucket:
		v = e.decideLeakyBucket(now, nowUS, p, cost, maxDelay)
	default:
		panic("ratemath: check called with unknown algorithm " + string(alg))
	}
	if p.Unit != 1 {
		// The durations in the limit's units, but for a reservation's wait,
		// in µs from nowUS.
		v.Retry = toMicros(v.Retry, nowUS, now, p.Unit)
		v.Reset = toMicros(v.Reset, nowUS, now, p.Unit)
	}
	return v
}

// Commit consumes cost from an entry that check has just returned, having
// found room in it; now is in µs.
func (e *Entry) Commit(alg algorithms.Algorithm, nowUS int64, p Params, cost int64) {
	now := floorDiv(nowUS, p.Unit)
	switch alg {
	case algorithms.FixedWindow, algorithms.SlidingWindowCounter:
		e.B += cost
	case algorithms.SlidingWindowLog:
		for range cost {
			e.Log.push(now)
		}
	case algorithms.TokenBucket:
		e.A -= cost * p.Period
	case algorithms.LeakyBucket:
		after := (e.A-now)*p.Rate + e.B + cost*p.Period
		e.A, e.B, e.C = now+after/p.Rate, after%p.Rate, max(after-p.Burst*p.Period, 0)
	}
}

// Expiry is the µs from which a committed entry means no state and may be
// dropped, as the scripts' PEXPIRE: the end of the window, or the time the
// bucket is full again. It is computed from the state rather than stored,
// which keeps a stored entry small.
func (e *Entry) Expiry(alg algorithms.Algorithm, p Params) int64 {
	return e.expiryIn(alg, p) * p.Unit
}

func (e *Entry) expiryIn(alg algorithms.Algorithm, p Params) int64 {
	switch alg {
	case algorithms.FixedWindow:
		return e.A
	case algorithms.SlidingWindowLog:
		// One period after the newest time, which no later than now.
		return e.Log.at(int64(e.Log.N)-1) + p.Period
	case algorithms.SlidingWindowCounter:
		return e.A + 2*p.Period
	case algorithms.TokenBucket:
		return e.B + ceilDiv(p.Burst*p.Period-e.A, p.Rate)
	case algorithms.LeakyBucket:
		if e.B > 0 {
			return e.A + 1 // the TAT's fraction rounds up, as ceilDiv(after, rate)
		}
		return e.A
	}
	panic("ratemath: expiry of unknown algorithm " + string(alg))
}

// Binding picks the limit a decision reports, by the rule the scripts share:
// on a pass the least remaining (the later reset on a tie), on a deny the
// longest retry; the first such limit on a full tie.
type Binding struct {
	Allowed   bool
	pass      Verdict
	deny      Verdict
	passIndex int
	denyIndex int
	wait      int64 // the longest wait of the limits that reserve (µs)
}

func (b *Binding) Add(i int, v Verdict) {
	if v.OK {
		b.wait = max(b.wait, v.Wait)
		if b.passIndex < 0 || v.Remaining < b.pass.Remaining ||
			(v.Remaining == b.pass.Remaining && v.Reset > b.pass.Reset) {
			b.passIndex, b.pass = i, v
		}
		return
	}
	b.Allowed = false
	if b.denyIndex < 0 || v.Retry > b.deny.Retry {
		b.denyIndex, b.deny = i, v
	}
}

func NewBinding() Binding { return Binding{Allowed: true, passIndex: -1, denyIndex: -1} }

// Result turns the chosen verdict into a Result.
func (b *Binding) Result(alg algorithms.Algorithm, limits []algorithms.Limit) algorithms.Result {
	if !b.Allowed {
		return MakeResult(alg, limits, b.denyIndex, false, b.deny.Remaining, b.deny.Retry, b.deny.Reset)
	}
	return MakeResult(alg, limits, b.passIndex, true, b.pass.Remaining, b.wait, b.pass.Reset)
}

// ResultIn is Result with the limits' policies (PoliciesOf) computed
// once, for a store that makes many decisions on one limiter.
func (b *Binding) ResultIn(policies []algorithms.Policy) algorithms.Result {
	if !b.Allowed {
		return PolicyResult(policies[b.denyIndex], b.denyIndex, false, b.deny.Remaining, b.deny.Retry, b.deny.Reset)
	}
	return PolicyResult(policies[b.passIndex], b.passIndex, true, b.pass.Remaining, b.wait, b.pass.Reset)
}

// MakeResult builds the Result of a decision bound by limits[i]. retryUS
// is the RetryAfter of a denial, the Delay of an admission (as the scripts
// answer).
func MakeResult(alg algorithms.Algorithm, limits []algorithms.Limit, i int, allowed bool, remaining, retryUS, resetUS int64) algorithms.Result {
	pol := algorithms.Policy{Quota: QuotaOf(alg, limits[i]), Window: WindowOf(alg, limits[i])}
	return PolicyResult(pol, i, allowed, remaining, retryUS, resetUS)
}

// PolicyResult is MakeResult for the limit whose policy (PoliciesOf) is pol.
func PolicyResult(pol algorithms.Policy, i int, allowed bool, remaining, retryUS, resetUS int64) algorithms.Result {
	r := algorithms.Result{
		Index:      i,
		Allowed:    allowed,
		Limit:      pol.Quota,
		Remaining:  int(max(remaining, 0)),
		ResetAfter: usToDuration(resetUS),
		Period:     pol.Window,
	}
	if allowed {
		r.Delay = usToDuration(retryUS)
	} else {
		r.RetryAfter = usToDuration(retryUS)
	}
	return r
}

func usToDuration(us int64) time.Duration { return time.Duration(max(us, 0)) * time.Microsecond }

// TimeLog is a ring of times, oldest first, that grows by doubling; in a
// steady state it allocates nothing. Copies share the ring, so only the copy
// that is stored back may push.
type TimeLog struct {
	Buf  []int64 // length a power of two, or 0
	head int
	N    int
}

// Store makes l the log src, as a store writes back the entry that Decide
// and Commit changed: field by field, and the ring only when push grew it.
// A copy of the whole log would load head and N wider than they were just
// written, which waits for every earlier store, the time that push wrote to
// the ring among them (a cache miss in a store of many keys); and it would
// run the GC's write barrier on every decision. The log stored reads as src
// (TestTimeLogStore).
func (l *TimeLog) Store(src *TimeLog) {
	if len(l.Buf) != len(src.Buf) || len(src.Buf) != 0 && &l.Buf[0] != &src.Buf[0] {
		l.Buf = src.Buf
	}
	l.head = src.head
	l.N = src.N
}

func (l *TimeLog) at(i int64) int64 { return l.Buf[(l.head+int(i))&(len(l.Buf)-1)] }

// clampTo moves the times after now, which only a clock that stepped back
// leaves, to now: the requests they record happened no later than now. It
// reports whether it moved any. The log stays in order.
func (l *TimeLog) clampTo(now int64) bool {
	moved := false
	for i := l.N - 1; i >= 0 && l.at(int64(i)) > now; i-- {
		l.Buf[(l.head+i)&(len(l.Buf)-1)] = now
		moved = true
	}
	return moved
}

// dropThrough removes the times at or before cutoff.
func (l *TimeLog) dropThrough(cutoff int64) {
	for l.N > 0 && l.Buf[l.head] <= cutoff {
		l.head = (l.head + 1) & (len(l.Buf) - 1)
		l.N--
	}
}

// push adds t, which is no earlier than any time in the log (clampTo has
// run), at the end.
func (l *TimeLog) push(t int64) {
	if l.N == len(l.Buf) {
		grown := make([]int64, max(4, 2*len(l.Buf)))
		for i := range l.N {
			grown[i] = l.at(int64(i))
		}
		l.Buf, l.head = grown, 0
	}
	l.Buf[(l.head+l.N)&(len(l.Buf)-1)] = t
	l.N++
}
