package redisstore

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Where a script call is laid out: its script, keys and arguments, for
// every kind of call: a rate limit's, the batches' decisions and a call
// alone (a decision, Peek, Reserve, Charge, Refund: see callAlone) alike;
// a lease's grant and return; the debtors'.
// A job's requests are its costs, or its list when it has one (a peek
// "p1", a reservation "d…", a charge "o…", a refund "r…": the driver's
// mini-language, lua/driver.lua).

// listOf is j's requests as the script's list.
func (j *job) listOf() string {
	if j.list != "" {
		return j.list
	}
	return costList(j.costs)
}

// requests is how many answers j's call brings back for it.
func (j *job) requests() int {
	if j.list != "" {
		return 1
	}
	return len(j.costs)
}

// plainList reports whether list holds plain costs only (digits,
// spaces, commas): what the one-request and batch scripts take.
func plainList(list string) bool {
	for i := 0; i < len(list); i++ {
		if c := list[i]; (c < '0' || c > '9') && c != ' ' && c != ',' {
			return false
		}
	}
	return list != ""
}

// assemble lays out the call's keys and arguments: every job's keys in
// turn, and its requests as one group of ARGV[1]; then, when withOnce says
// so, the key and lifetime of the call's kept reply (see callIDs), in the
// first job's slot. The keys are cut from one string. A limiter of one
// limit sends its one-request script for a job of one plain cost alone
// (assembleOne), and its batch script (see scripts.Batch) for plain
// costs, without the limit's arguments; proved to answer as the driver
// by TestBatchScriptMatchesDriver.
func (c *scriptCall) assemble(withOnce bool) {
	l := c.l
	if len(c.jobs) == 1 && l.scriptOne != nil {
		if list := c.jobs[0].listOf(); l.scriptFor(list) == l.scriptOne {
			c.assembleOne(list, withOnce)
			return
		}
	}
	var idText [32]byte
	var id []byte
	c.id = 0
	if withOnce {
		c.id = l.guard.ids.id()
		id = l.guard.ids.appendID(idText[:0], c.id)
	}
	size, groups := 0, 0
	suffixes := 0
	for _, suffix := range l.suffixes {
		suffixes += len(suffix)
	}
	for _, j := range c.jobs {
		size += len(l.suffixes)*(len(l.prefix)+len(hashTagSafe(j.key))) + suffixes
		groups += 4 * j.requests()
	}
	if withOnce {
		size += len(l.prefix) + len(hashTagSafe(c.jobs[0].key)) + len(onceInfix) + len(id)
	}
	var b, list strings.Builder
	b.Grow(size)
	list.Grow(groups)
	for n, j := range c.jobs {
		tag := hashTagSafe(j.key)
		for _, suffix := range l.suffixes {
			b.WriteString(l.prefix)
			b.WriteString(tag)
			b.WriteString(suffix)
		}
		if n > 0 {
			list.WriteByte(',')
		}
		list.WriteString(j.listOf())
	}
	if withOnce {
		b.WriteString(l.prefix)
		b.WriteString(hashTagSafe(c.jobs[0].key))
		b.WriteString(onceInfix)
		b.Write(id)
	}
	c.keys = cutKeys(l, b.String(), c.jobs, withOnce, c.keyBuf[:0])
	if all := list.String(); l.scriptBatch != nil && plainList(all) {
		// One limit, and plain costs: the limit is in the script, the
		// costs its one argument before the reply's lifetime.
		c.script = l.scriptBatch
		c.args = append(c.argBuf[:0], costArg(all))
	} else {
		c.script = l.script
		c.args = append(append(c.argBuf[:0], costArg(all)), l.limitArgs...)
	}
	if withOnce {
		c.once.set(l.onceTTL)
		c.args = append(c.args, &c.once)
	}
}

// assembleOne lays out a call of the one-request script, whose limit is
// in the script: the key's state and the cost; then, when withOnce says
// so, the call's id when its record stays in the state, else the key and
// lifetime of its kept reply (see recordsInState).
func (c *scriptCall) assembleOne(list string, withOnce bool) {
	l := c.l
	c.script = l.scriptOne
	c.args = append(c.argBuf[:0], costArg(list))
	c.id = 0
	switch {
	case !withOnce:
		c.keys = c.keyBuf[:1]
		l.keysOf(c.jobs[0].key, c.keys, 0)
	case recordsInState(l.alg):
		c.keys = c.keyBuf[:1]
		l.keysOf(c.jobs[0].key, c.keys, 0)
		c.id = l.guard.ids.id()
		c.once.setRecord(l.guard.ids, c.id)
		c.args = append(c.args, &c.once)
	default: // the state's key, then the reply's
		c.keys = c.keyBuf[:2]
		c.id = l.guard.ids.id()
		l.keysOf(c.jobs[0].key, c.keys, c.id)
		c.once.set(l.onceTTL)
		c.args = append(c.args, &c.once)
	}
}

// cutKeys cuts from text, as assemble wrote it, the keys of jobs and, when
// once says so, the key of the call's reply, into dst.
func cutKeys(l *redisLimiter, text string, jobs []*job, once bool, dst []string) []string {
	n := len(jobs) * len(l.suffixes)
	if once {
		n++
	}
	keys := dst[:0]
	if cap(keys) < n {
		keys = make([]string, 0, n)
	}
	at := 0
	for _, j := range jobs {
		tag := len(l.prefix) + len(hashTagSafe(j.key))
		for _, suffix := range l.suffixes {
			keys = append(keys, text[at:at+tag+len(suffix)])
			at += tag + len(suffix)
		}
	}
	if once {
		keys = append(keys, text[at:])
	}
	return keys
}

// clearForReuse drops what c refers to, keeping its buffers (and its
// onceArg's), for the next call alone.
func (c *scriptCall) clearForReuse() {
	c.l, c.jobs, c.keys, c.args, c.cmd, c.script = nil, nil, nil, nil, nil, nil
	c.id, c.charge, c.keepOnce = 0, false, false
	clear(c.keyBuf[:])
	clear(c.argBuf[:])
	c.jobBuf[0], c.callBuf[0] = nil, nil
}

// scriptOf returns the call's script: the one assemble chose, or the
// driver for a call it did not lay out (a charge).
func (c *scriptCall) scriptOf() *redis.Script {
	if c.script == nil {
		c.script = c.l.script
	}
	return c.script
}

// keysOf fills keys with the Redis keys of key's state, one per limit,
// and, when keys has room for one more, the key of call id's reply. They
// are cut from one string: one allocation however many there are.
func (l *redisLimiter) keysOf(key string, keys []string, id uint64) {
	tag := hashTagSafe(key)
	once := len(keys) > len(l.suffixes)
	var idText [32]byte
	size := len(keys) * (len(l.prefix) + len(tag))
	for _, suffix := range l.suffixes {
		size += len(suffix)
	}
	var text []byte
	if once {
		text = l.guard.ids.appendID(idText[:0], id)
		size += len(onceInfix) + len(text)
	}
	var b strings.Builder
	b.Grow(size)
	var endBuf [8]int
	ends := endBuf[:0]
	for _, suffix := range l.suffixes {
		b.WriteString(l.prefix)
		b.WriteString(tag)
		b.WriteString(suffix)
		ends = append(ends, b.Len())
	}
	if once {
		b.WriteString(l.prefix)
		b.WriteString(tag)
		b.WriteString(onceInfix)
		b.Write(text)
		ends = append(ends, b.Len())
	}
	s, start := b.String(), 0
	for i, end := range ends {
		keys[i] = s[start:end]
		start = end
	}
}

// A lease's calls (lua/lease.lua), which the lease worker's pipelines
// send: a grant and a return, with their keys under the state's hash tag.

// grantArgs are the arguments of a grant of want units, with the request
// of cost (0: a renewal, which decides none), under lease id (see
// lua/lease.lua).
func (l *leasedLimiter) grantArgs(id string, cost, want int) []any {
	return []any{"g", id, cost, want, l.lifeArg, l.keep}
}

// returnArgs are the arguments of a return of left units of lease id.
func returnArgs(id string, left int) []any { return []any{"r", id, left} }

// runLease sends the lease script with keys and args through c, by its
// SHA, or with its source when eval is set (see sendPipelined).
func (l *leasedLimiter) runLease(ctx context.Context, c redis.Scripter, eval bool, keys []string, args ...any) *redis.Cmd {
	if eval {
		return l.script.Eval(ctx, c, keys, args...)
	}
	return l.script.EvalSha(ctx, c, keys, args...)
}

// leaseKeys are the keys of key's leases: the state, the grants' records
// and the holders, under the state's hash tag.
func (l *leasedLimiter) leaseKeys(key string) []string {
	keys := make([]string, 1, 3)
	l.keysOf(key, keys, 0)
	return append(keys, keys[0]+":lease", keys[0]+":holders")
}

// leaseID returns a new lease id, unique to the store.
func (l *leasedLimiter) leaseID() string {
	var b [48]byte
	return string(l.guard.ids.appendID(append(b[:0], 'L'), l.guard.ids.id()))
}

// debtorsCall lays out a call of the debtors script (lua/debtors.lua):
// the prefix's debtors set, the store's id, op ("+" owes, "-" owes no
// more, "?" asks) and how long the set is kept.
func debtorsCall(set, id, op string) (keys []string, args []any) {
	return []string{set}, []any{id, op, debtorTTL.Milliseconds()}
}
