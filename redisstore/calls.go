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
	// keepOnce: a refund's call, which keeps its exactly-once key even in
	// a slot in migration (see migrate.go).
	keepOnce bool

	// Room for the keys and arguments of a call of one job and up to
	// three limits, and for a call alone's job and call list (callAlone).
	keyBuf  [4]string
	argBuf  [3]any
	jobBuf  [1]*job
	callBuf [1]*scriptCall
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
		j.results, j.err = c.l.parse(reply, j.requests(), j.resultBuf[:])
		return nil
	}
	for _, j := range c.jobs {
		group, rest, _ := strings.Cut(reply, ",")
		reply = rest
		if msg, failed := strings.CutPrefix(group, "E"); failed {
			j.err = scriptError(c.l.alg, groupError(msg))
			continue
		}
		j.results, j.err = c.l.parse(group, j.requests(), j.resultBuf[:])
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
// error reply. A refund's call (keepOnce) keeps that key, and is not sent
// again.
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
