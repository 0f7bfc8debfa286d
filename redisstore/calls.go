package redisstore

import (
	"context"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/clusterslot"
)

// scriptCall is one script call of a flush: the jobs of one limiter whose
// keys Redis can decide together (any keys on a single server, the keys of
// one slot on Cluster), each job a group of the call.
type scriptCall struct {
	l    *redisLimiter
	jobs []*job
	keys []string
	args []any
	cmd  *redis.Cmd

	script *redis.Script // the call's script (see assemble)
	once   onceArg       // the reply's lifetime, when the call carries an id
	id     uint64        // the call's id; 0 for none

	charge bool // it sends an owed charge: no jobs, and its reply is not read
}

// callsOf groups jobs into script calls, in order of first appearance:
// one call per limiter on a single server, one per limiter and slot on
// Cluster, one per job on clients whose sharding it does not know.
func callsOf(jobs []*job) []*scriptCall {
	type callKey struct {
		l    *redisLimiter
		slot int
	}
	keyOf := func(n int, j *job) callKey {
		k := callKey{l: j.l}
		switch j.l.client.(type) {
		case *redis.Client:
		case *redis.ClusterClient:
			k.slot = clusterSlot(hashTagSafe(j.key))
		default:
			k.slot = -1 - n // a call of its own
		}
		return k
	}
	var calls []*scriptCall
	var keys []callKey                // of calls
	var index map[callKey]*scriptCall // once there are more than a few calls
	for n, j := range jobs {
		k := keyOf(n, j)
		var c *scriptCall
		if index != nil {
			c = index[k]
		} else if i := slices.Index(keys, k); i >= 0 {
			c = calls[i]
		}
		if c != nil {
			c.jobs = append(c.jobs, j)
			continue
		}
		if n == 0 && oneCall(jobs, func(n int, j *job) bool { return keyOf(n, j) == k }) {
			calls = []*scriptCall{{l: j.l, jobs: jobs}} // the common case: no copy
			break
		}
		c = &scriptCall{l: j.l, jobs: []*job{j}}
		calls, keys = append(calls, c), append(keys, k)
		if index == nil && len(calls) > 8 {
			index = make(map[callKey]*scriptCall, 2*len(calls))
			for i, c := range calls {
				index[keys[i]] = c
			}
		} else if index != nil {
			index[k] = c
		}
	}
	for _, c := range calls {
		c.assemble(c.l.once)
		c.tellJobs()
	}
	return calls
}

// tellJobs tells the jobs of an assembled call which call they went in,
// so that what the twin admits in their stead after a failure is charged
// unless the call counted it (see callDoubt): a job alone in its call by
// the call's id; a job among several also by its place in the call's
// reply, which the key kept under the last of the call's keys tells.
func (c *scriptCall) tellJobs() {
	if c.id == 0 {
		return
	}
	if len(c.jobs) == 1 {
		c.jobs[0].id = c.id
		return
	}
	once := c.keys[len(c.keys)-1]
	for n, j := range c.jobs {
		j.id, j.in = c.id, callGroup{once: once, group: n}
	}
}

// oneCall reports whether every job goes in the first one's call.
func oneCall(jobs []*job, same func(n int, j *job) bool) bool {
	for n, j := range jobs {
		if !same(n, j) {
			return false
		}
	}
	return true
}

// assemble lays out the call's keys and arguments: every job's keys in
// turn, and its costs as one group of ARGV[1]; then, when withOnce says
// so, the key and lifetime of the call's kept reply (see callIDs), in the
// first job's slot. The keys are cut from one string. A limiter of one
// limit sends its batch script (see scripts.Batch), without the limit's
// arguments; proved to answer as the driver by
// TestBatchScriptMatchesDriver.
func (c *scriptCall) assemble(withOnce bool) {
	l := c.l
	if len(c.jobs) == 1 && len(c.jobs[0].costs) == 1 && l.scriptOne != nil {
		if list := costList(c.jobs[0].costs); l.scriptFor(list) == l.scriptOne {
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
		groups += 4 * len(j.costs)
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
		list.WriteString(costList(j.costs))
	}
	if withOnce {
		b.WriteString(l.prefix)
		b.WriteString(hashTagSafe(c.jobs[0].key))
		b.WriteString(onceInfix)
		b.Write(id)
	}
	c.keys = cutKeys(l, b.String(), c.jobs, withOnce)
	if l.scriptBatch != nil {
		// One limit, and a job's costs are plain: the limit is in the
		// script, the costs its one argument before the reply's lifetime.
		c.script = l.scriptBatch
		c.args = append(make([]any, 0, 2), costArg(list.String()))
	} else {
		c.script = l.script
		c.args = make([]any, 0, 2+len(l.limitArgs))
		c.args = append(append(c.args, costArg(list.String())), l.limitArgs...)
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
	c.args = append(make([]any, 0, 2), costArg(list))
	c.id = 0
	switch {
	case !withOnce:
		c.keys = make([]string, 1)
		l.keysOf(c.jobs[0].key, c.keys, 0)
	case recordsInState(l.alg):
		c.keys = make([]string, 1)
		l.keysOf(c.jobs[0].key, c.keys, 0)
		c.id = l.guard.ids.id()
		c.once.setRecord(l.guard.ids, c.id)
		c.args = append(c.args, &c.once)
	default: // the state's key, then the reply's
		c.keys = make([]string, 2)
		c.id = l.guard.ids.id()
		l.keysOf(c.jobs[0].key, c.keys, c.id)
		c.once.set(l.onceTTL)
		c.args = append(c.args, &c.once)
	}
}

// cutKeys cuts from text, as assemble wrote it, the keys of jobs and, when
// once says so, the key of the call's reply.
func cutKeys(l *redisLimiter, text string, jobs []*job, once bool) []string {
	n := len(jobs) * len(l.suffixes)
	if once {
		n++
	}
	keys := make([]string, 0, n)
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

// scriptOf returns the call's script: the one assemble chose, or the
// driver for a call it did not lay out (a charge).
func (c *scriptCall) scriptOf() *redis.Script {
	if c.script == nil {
		c.script = c.l.script
	}
	return c.script
}

// read hands the call's reply, or its error, to its jobs, and returns the
// error of a call Redis did not answer (nil when it answered, even with an
// error for one key).
func (c *scriptCall) read() error {
	reply, err := c.cmd.Text()
	if c.charge {
		if err != nil {
			return scriptError(c.l.alg, err)
		}
		return nil
	}
	if err != nil {
		err = scriptError(c.l.alg, err)
		for _, j := range c.jobs {
			j.err = err
		}
		return err
	}
	if len(c.jobs) == 1 {
		j := c.jobs[0]
		j.results, j.err = c.l.parse(reply, len(j.costs), j.resultBuf[:])
		return nil
	}
	for _, j := range c.jobs {
		group, rest, _ := strings.Cut(reply, ",")
		reply = rest
		if msg, failed := strings.CutPrefix(group, "E"); failed {
			j.err = scriptError(c.l.alg, groupError(msg))
			continue
		}
		j.results, j.err = c.l.parse(group, len(j.costs), j.resultBuf[:])
	}
	return nil
}

// groupError is a key's error inside a call that decided several keys:
// Redis answered, as with an error reply.
type groupError string

func (e groupError) Error() string { return string(e) }

// RedisError marks it as Redis's own error, like an error reply.
func (groupError) RedisError() {}

// runCalls sends the calls, together in one pipeline when there are
// several, with the scripts Redis has lost sent in full once more, and
// those a Cluster slot in migration refused sent once more without the
// exactly-once key (see migrate.go); it returns the error that says most
// about Redis's health: nil when Redis answered every call, even with an
// error reply. The calls carry no refunds, which must keep that key.
func runCalls(ctx context.Context, client redis.UniversalClient, calls []*scriptCall) error {
	calls = avoidMigrating(calls)
	send(ctx, client, calls)
	if refused, again := refusedInMigration(calls); len(again) > 0 {
		// Not run: the key that kept them from running goes.
		send(ctx, client, again)
		calls = replaced(calls, refused, again)
	}
	var health error
	for _, c := range calls {
		if err := c.read(); err != nil && (health == nil || classify(health) == ErrorScript) {
			health = err
		}
	}
	return health
}

// replaced returns calls without those refused, followed by again, the
// calls sent in their stead (some of them the refused calls, changed).
func replaced(calls, refused, again []*scriptCall) []*scriptCall {
	out := make([]*scriptCall, 0, len(calls)+len(again))
	for _, c := range calls {
		if !slices.Contains(refused, c) {
			out = append(out, c)
		}
	}
	return append(out, again...)
}

// clusterSlot is the Cluster slot of a key whose hash tag is tag.
func clusterSlot(tag string) int { return clusterslot.Of(tag) }
