package redisstore

import "github.com/redlimit/redlimit/internal/clusterslot"

// A Cluster slot in migration (MIGRATING on its owner, IMPORTING on the
// target) serves a command only when its node holds all of the command's
// keys, or none of them and the command has a single key: otherwise the
// owner answers ASK (a key is missing) and the target TRYAGAIN (a missing
// key of several). The key that keeps a deciding call's reply (see
// callIDs) never exists before the call, so a call that carries it is
// never served while its slot migrates, and go-redis's redirections and
// backoff end in an error after some 50-100 ms.
//
// Invariant: a call refused so (it did not run) is sent once more without
// that key, and the calls of its slot go without it at once for
// clusterslot.Hold; a call of several keys of the slot is split into one
// call per key, since each key's state may be on either node. Then a key
// whose limits' states are all on one node, or that has one limit and no
// state on either, is decided by Redis. What does not hold meanwhile:
//   - Such calls count once only as long as go-redis does not send them
//     again: after a lost reply it does (up to MaxRedirects times on
//     Cluster), and a call that ran may then count twice, which errs on the
//     strict side; and a request the twin admits after such a call failed
//     with a doubtful error is not charged to Redis (see doubtOf), as with
//     a client that never resends.
//   - Refunds keep the key, since a refund that ran twice would give back
//     twice: a refund in a migrating slot fails, and the request stays
//     paid for.
//   - A key of several limits whose states are split between the nodes
//     (the reshard has moved some of them), or are on neither (a new key,
//     or one whose state expired), is still refused with TRYAGAIN until
//     the slot is stable, and decided by the FailureMode as for any error.
//
// Proved by TestClusterMigratingSlotDecidedByRedis.

// carriesOnce reports whether the call carries the exactly-once key: a
// key more than its jobs' (a charge's one key) limits.
func (c *scriptCall) carriesOnce() bool {
	return len(c.keys) > max(len(c.jobs), 1)*len(c.l.limits)
}

// movable reports whether c is sent without the exactly-once key while
// its slot migrates: a call that carries it, and not a refund's.
func (c *scriptCall) movable() bool { return c.carriesOnce() && !c.keepOnce }

// withoutOnce returns c's work as calls without the exactly-once key, for
// a slot in migration: c itself, stripped, when it has at most one job (a
// charge has none), else a call per job.
func (c *scriptCall) withoutOnce() []*scriptCall {
	c.id = 0
	for _, j := range c.jobs {
		j.id, j.in = 0, callGroup{} // no reply kept: nothing to ask
	}
	if len(c.jobs) <= 1 {
		c.keys, c.args = c.keys[:len(c.keys)-1], c.args[:len(c.args)-1]
		return []*scriptCall{c}
	}
	calls := make([]*scriptCall, len(c.jobs))
	for i := range c.jobs {
		calls[i] = &scriptCall{l: c.l, jobs: c.jobs[i : i+1 : i+1]}
		calls[i].assemble(false)
	}
	return calls
}

// avoidMigrating returns calls with those of slots found migrating sent
// without the exactly-once key (see withoutOnce): calls itself when there
// are none.
func avoidMigrating(calls []*scriptCall) []*scriptCall {
	var out []*scriptCall
	for i, c := range calls {
		g := c.l.guard
		if !c.movable() || !g.moving.Holds(clusterslot.TagOf(c.keys[0]), g.clock) {
			if out != nil {
				out = append(out, c)
			}
			continue
		}
		if out == nil {
			out = append(make([]*scriptCall, 0, len(calls)+len(c.jobs)), calls[:i]...)
		}
		out = append(out, c.withoutOnce()...)
	}
	if out == nil {
		return calls
	}
	return out
}

// refusedInMigration returns the sent calls that carried the exactly-once
// key and that a slot in migration refused, holding their slots, and the
// calls to send in their stead: none when Redis refused none.
func refusedInMigration(calls []*scriptCall) (refused, again []*scriptCall) {
	for _, c := range calls {
		if c.cmd == nil || !c.movable() {
			continue
		}
		g := c.l.guard
		if g.moving.Learn(clusterslot.TagOf(c.keys[0]), c.cmd.Err(), g.clock()) {
			refused = append(refused, c)
			again = append(again, c.withoutOnce()...)
		}
	}
	return refused, again
}
