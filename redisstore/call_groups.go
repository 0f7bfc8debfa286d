package redisstore

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Grouped calls: what the twin admits in place of a request whose call
// decided several keys together, and failed after it may have run, is
// charged unless that call counted the request.
//
// Invariant: such an admission is owed as a doubt tagged with the call's
// group (callGroup): the key that keeps the call's reply and the key's
// place in it. No flush sends it (takeChargeLocked leaves it); the settler
// first reads the kept reply: when the key's part admitted the request,
// the call counted it and the doubt is dropped; when no reply is kept (the
// call never ran, or counted nothing) or the key's part did not admit it,
// the doubt becomes a charge. A reply kept no longer (onceTTL after the
// call, about 2.2 s with the default timeout) reads as not run: the
// request may then be counted twice, the strict side. A key's part of
// several requests is charged whatever the call did, as for a call of
// one key (see finish).
//
// Proved by TestGroupedCallsAreCharged.

// groupAsk is a key whose owed doubt stands for a request of a call of
// several keys.
type groupAsk struct {
	key queueKey
	in  callGroup
}

// takeGroupDoubtsLocked takes up to most keys whose doubt the settler
// must ask Redis about, marking them busy. b.mu is held.
func (b *batcher) takeGroupDoubtsLocked(most int) []groupAsk {
	var asks []groupAsk
	for k, o := range b.owed {
		if o.busy || o.doubt == 0 || o.in == (callGroup{}) {
			continue
		}
		o.busy = true
		if asks = append(asks, groupAsk{key: k, in: o.in}); len(asks) == most {
			break
		}
	}
	return asks
}

// resolveGroups reads the kept replies of asks' calls in one pipeline
// under ctx and turns each doubt into a charge, or drops it, as the
// invariant says. It reports whether Redis answered every read; an
// unanswered one stays owed as it was, to be asked again.
func (b *batcher) resolveGroups(ctx context.Context, asks []groupAsk) bool {
	l := asks[0].key.l
	cmds := make([]*redis.StringCmd, len(asks))
	_, _ = l.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, a := range asks {
			cmds[i] = p.Get(ctx, a.in.once)
		}
		return nil
	})
	b.mu.Lock()
	defer b.mu.Unlock()
	all := true
	for i, a := range asks {
		o := b.owed[a.key]
		if o == nil { // dropped meanwhile (a reset, the store closed)
			continue
		}
		o.busy = false
		reply, err := cmds[i].Result()
		switch {
		case errors.Is(err, redis.Nil):
			o.cost += o.doubt
		case err != nil:
			all = false
			continue
		case !groupCounted(reply, a.in):
			o.cost += o.doubt
		}
		b.doubtSettledLocked(a.key, o)
	}
	return all
}

// groupCounted reports whether the call whose kept reply this is counted
// the part in names: a decision's, if it admitted its request; a grouped
// charge's, if it is no error.
func groupCounted(reply string, in callGroup) bool {
	if in.charge {
		return !strings.HasPrefix(groupPart(reply, in.group), "E")
	}
	return groupAdmitted(reply, in.group)
}

// groupPart returns the part at group of a reply: parts are separated by
// commas.
func groupPart(reply string, group int) string {
	for range group {
		_, reply, _ = strings.Cut(reply, ",")
	}
	part, _, _ := strings.Cut(reply, ",")
	return part
}

// groupAdmitted reports whether the part at group of a call's kept reply
// (parts separated by commas, each a request's five integers, allowed
// first, or "E" and an error) admitted its request.
func groupAdmitted(reply string, group int) bool {
	return strings.HasPrefix(groupPart(reply, group), "1 ")
}
