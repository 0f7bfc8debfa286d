package redisstore

import (
	"context"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// leasedLimits is a limiter of several limits under WithLeases (see
// leaseable): each limit has leases of its own (a part: a leasedLimiter
// of that one limit, with its own lease table, over the same Redis state
// the exact limiter keeps for the limit), and a request is admitted from
// memory only when every limit's leases have units for its cost. Spending
// is all or nothing: when a limit has too few units, the units the others
// took go back to the leases they came from (leaseTable.refill), and the
// request is decided in Redis by the exact limiter it wraps, atomically
// across its limits, batched, fault path and all. When that decision
// admits the request, the limits that lacked units ask for a lease by
// the renewal path: the lease worker's pipelines, sending nothing while
// the breaker is open or the key is gated after a fault. A key's first
// request on an instance costs one exact decision, as for one limit; a
// limit with nothing to lease asks again after a ttl. Everything else
// (Peek, Refund, Charge, Reserve) is the exact limiter's.
//
// Invariant: every unit admitted is counted in each limit's state in
// Redis before it is admitted (a lease's when it is granted, an exact
// decision's when it is made), so while Redis answers the instances admit
// at most each limit's quota per window (TestLeasedLimitsAtMostEachLimit);
// once the leases are given back, every key reaches exactly what its
// tightest limit allows (TestLeasedLimitsReachTightest). Capacity: each
// part's table holds leaseTableCapacity keys; a key a part's full table
// has no room for is decided exactly (TestLeasedLimitsFullTableDecidesExactly).
type leasedLimits struct {
	*redisLimiter
	parts  []*leasedLimiter // one per limit, in the limits' order
	leases *leaseWorker
	most   int // the smallest quota: a request costs at most that
	ttl    int64
}

// leaseSpends is the most limits whose spends a decision keeps on its
// stack; a limiter of more keeps them on the heap.
const leaseSpends = 4

// newLeasedLimits returns l, a limiter of several limits, deciding from
// leases renewed by w.
func newLeasedLimits(l *redisLimiter, w *leaseWorker, ttl time.Duration) *leasedLimits {
	ll := &leasedLimits{redisLimiter: l, leases: w, ttl: int64(ttl), most: ratemath.QuotaOf(l.alg, l.limits[0])}
	for i := range l.limits {
		// A view of the exact limiter with limit i alone: its keys are the
		// exact limiter's keys of that limit.
		view := &redisLimiter{client: l.client, alg: l.alg, limits: l.limits[i : i+1], prefix: l.prefix,
			channel: l.channel, suffixes: l.suffixes[i : i+1], guard: l.guard, onceTTL: l.onceTTL, once: l.once}
		ll.parts = append(ll.parts, newLeasePart(view, l, w, ttl))
		ll.most = min(ll.most, ratemath.QuotaOf(l.alg, l.limits[i]))
	}
	return ll
}

// Allow implements Limiter: from every limit's leases when they all have
// units, else exactly in Redis, asking for the leases that lacked units.
func (l *leasedLimits) Allow(ctx context.Context, key string, cost int) (algorithms.Result, error) {
	// The checks CheckRequest makes; it says what failed.
	if key == "" || len(key) > algorithms.MaxKeyLength || cost < 1 || cost > l.most {
		return algorithms.Result{}, ratemath.CheckRequest(l.alg, l.limits, key, cost)
	}
	if l.leases.stopped.Load() { // after Close
		return l.redisLimiter.Allow(ctx, key, cost)
	}
	now := l.guard.leaseNow()
	var buf [leaseSpends]leaseSpend
	sps := buf[:0]
	spent := true
	for _, p := range l.parts {
		sp := p.table.spend(key, cost, now, l.ttl, p.most)
		spent = spent && sp.outcome == leaseSpent
		sps = append(sps, sp)
	}
	if spent {
		l.renewAsked(key, sps, false)
		return l.fromLeases(sps, now), nil
	}
	for i, sp := range sps {
		if sp.outcome == leaseSpent {
			l.parts[i].table.refill(key, sp.took)
		}
	}
	res, err := l.redisLimiter.Allow(ctx, key, cost)
	l.renewAsked(key, sps, err == nil && res.Allowed)
	return res, err
}

// renewAsked queues the renewals the spends asked for: those of spent
// leases that are running low, and, when seek is set, those of limits
// that had no units; it ends the seeking of the others.
func (l *leasedLimits) renewAsked(key string, sps []leaseSpend, seek bool) {
	for i, sp := range sps {
		p := l.parts[i]
		ask := sp.outcome == leaseSpent && sp.renew || sp.outcome == leaseSeek
		if !ask {
			continue
		}
		if sp.outcome == leaseSeek && !seek || !l.leases.renew(p, key, sp.want) {
			p.table.unseek(key)
		}
	}
}

// fromLeases is the Result of a request admitted from every limit's
// leases at now: the binding limit's, as the exact limiter reports it,
// the one with the least left and the later reset on a tie.
func (l *leasedLimits) fromLeases(sps []leaseSpend, now int64) algorithms.Result {
	bind := 0
	for i, sp := range sps[1:] {
		b := sps[bind]
		if sp.remaining < b.remaining || sp.remaining == b.remaining && sp.resetAt > b.resetAt {
			bind = i + 1
		}
	}
	p, sp := l.parts[bind], sps[bind]
	return algorithms.Result{Allowed: true, Limit: p.quota, Remaining: sp.remaining,
		ResetAfter: time.Duration(max(sp.resetAt-now, 0)), Period: p.period, Index: bind}
}

// Reset implements RateLimiter: the exact limiter's Reset, after
// forgetting this instance's leases of the key. Leases other instances
// hold of the key stay theirs until they end.
func (l *leasedLimits) Reset(ctx context.Context, key string) error {
	if err := ratemath.CheckRequest(l.alg, l.limits, key, 1); err != nil {
		return err
	}
	for _, p := range l.parts {
		p.table.drop(key)
	}
	return l.redisLimiter.Reset(ctx, key)
}
