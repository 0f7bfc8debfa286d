package redisstore

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Grouped charges: the settler sends the charges of many keys in one
// script call, as the flush sends decisions, so that Redis runs one call,
// and keeps one reply, for up to settleGroupKeys keys rather than one
// each.
//
// Invariant: a charge goes in a group only the first time it is sent
// (chargeTaken.fresh); the group's call carries an id of its own, and its
// reply is kept for chargeOnceTTL under the group's key. When the call
// fails after it may have run, each key's charge becomes a doubt of the
// group (callGroup with charge set), which the settler settles by reading
// the kept reply (resolveGroups): a reply that holds the key's part, and
// no error there, counted it; no reply, or an error, and the charge is
// owed again, to go in another call. A charge sent before on its own id
// goes again on it, alone (chargeCalls). So each charge counts once,
// unless the reply is read after it is gone (10 minutes) or before a
// call still on its way runs: then twice, the strict side.
//
// Groups follow callsOf's rule: one limiter, and on Cluster one slot, per
// call; a client whose sharding the store does not know sends each charge
// alone.
//
// Proved by TestGroupedChargesCountOnce; at scale by
// TestScaleSettleAtRedisSpeed (make test-scale).

// settleGroupKeys is the most keys one grouped charge call carries.
const settleGroupKeys = maxKeysPerCall

// chargePart is where one taken charge went: its call and its place among
// the call's groups, -1 in a call of its own.
type chargePart struct {
	call  *scriptCall
	group int
}

// groupedChargeCalls lays out calls for taken: fresh charges in groups,
// the others alone under their own id. parts[i] is where taken[i] went.
func groupedChargeCalls(taken []chargeTaken) (calls []*scriptCall, parts []chargePart) {
	type groupKey struct {
		l    *redisLimiter
		slot int
	}
	parts = make([]chargePart, len(taken))
	members := map[groupKey][]int{}
	var order []groupKey
	for i, c := range taken {
		k := groupKey{l: c.key.l}
		switch c.key.l.client.(type) {
		case *redis.Client:
		case *redis.ClusterClient:
			k.slot = clusterSlot(hashTagSafe(c.key.key))
		default:
			k.slot = -1
		}
		if !c.fresh || k.slot < 0 {
			call := chargeCalls(taken[i : i+1])[0]
			calls, parts[i] = append(calls, call), chargePart{call: call, group: -1}
			continue
		}
		if _, seen := members[k]; !seen {
			order = append(order, k)
		}
		members[k] = append(members[k], i)
		if len(members[k]) == settleGroupKeys {
			calls = append(calls, chargeGroup(k.l, taken, members[k], parts))
			members[k] = []int{} // parts hold the full group's call
		}
	}
	for _, k := range order {
		if len(members[k]) > 0 {
			calls = append(calls, chargeGroup(k.l, taken, members[k], parts))
		}
	}
	return calls, parts
}

// chargeGroup returns the call that charges taken[members] under one id
// of its own, and records each member's part in parts.
func chargeGroup(l *redisLimiter, taken []chargeTaken, members []int, parts []chargePart) *scriptCall {
	n := len(l.suffixes)
	id := l.guard.ids.id()
	keys := make([]string, 0, len(members)*n+1)
	buf := make([]string, n+1)
	var list strings.Builder
	call := &scriptCall{l: l, charge: true, id: id}
	for g, i := range members {
		l.keysOf(taken[i].key.key, buf[:n], 0)
		keys = append(keys, buf[:n]...)
		if g > 0 {
			list.WriteByte(',')
		}
		list.WriteString(chargeList(taken[i].cost))
		parts[i] = chargePart{call: call, group: g}
	}
	l.keysOf(taken[members[0]].key.key, buf, id) // the group's reply, in the first key's slot
	call.keys = append(keys, buf[n])
	call.args = append(append(make([]any, 0, 2+len(l.limitArgs)), list.String()), l.limitArgs...)
	call.args = append(call.args, chargeOnceTTLArg)
	return call
}

// settleParts records the outcome of the calls that carried taken, as
// parts says: counted charges are done; a failed call alone leaves its
// charge owed under its id; a failed group leaves each member's charge a
// doubt of the group, for the settler to ask Redis about; a member whose
// part failed is owed again. It reports whether all were counted.
func (b *batcher) settleParts(taken []chargeTaken, parts []chargePart) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	all := true
	for i, c := range taken {
		o := b.owed[c.key]
		if o == nil { // dropped meanwhile (the store closed)
			continue
		}
		o.busy = false
		cmd := parts[i].call.cmd
		switch {
		case cmd != nil && errors.Is(cmd.Err(), redis.ErrClosed):
			// The client is closed: nothing can send it any more.
			delete(b.owed, c.key)
			b.ungateLaterLocked(c.key, b.clock())
		case cmd == nil || cmd.Err() != nil:
			all = false
			if g := parts[i].group; g >= 0 {
				call := parts[i].call
				o.id, o.in = call.id, callGroup{once: call.keys[len(call.keys)-1], group: g, charge: true}
			}
		case parts[i].group >= 0 && partFailed(cmd, parts[i].group):
			all = false
			o.cost += o.doubt // not counted: owed again
			b.doubtSettledLocked(c.key, o)
		default:
			b.doubtSettledLocked(c.key, o)
		}
	}
	return all
}

// partFailed reports whether a grouped call's reply holds an error for the
// part at group.
func partFailed(cmd *redis.Cmd, group int) bool {
	reply, err := cmd.Text()
	return err != nil || strings.HasPrefix(groupPart(reply, group), "E")
}
