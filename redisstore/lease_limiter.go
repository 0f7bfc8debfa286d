package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
	"github.com/redlimit/redlimit/internal/scripts"
)

// leasedLimiter is a limiter of one limit under WithLeases (see
// leaseable): it decides from the leases in its table, and the requests
// it has no units for by the exact limiter it wraps, batched, fault path
// and all; when such a request of a busy key passes, the key's next lease
// is asked for by the lease worker (a renewal), so no decision waits for
// a grant.
// Everything else (Peek, Reset, Refund, Charge, Reserve) is the exact
// limiter's. It is also one limit's leases in a leasedLimits (a part),
// which spends its table and has its renewals sent, never its Allow.
//
// Invariant: while Redis answers, the instances admit at most the limit
// per window (TestLeasesAtMostLimitPerKey); once the leases are given
// back, every key can reach its limit exactly (TestLeasesReachLimit).
type leasedLimiter struct {
	*redisLimiter
	script  *redis.Script // scripts.Lease of the limit
	table   *leaseTable
	leases  *leaseWorker
	ttl     time.Duration // WithLeases
	most    int           // the largest lease
	quota   int
	period  time.Duration
	keep    string // how long (ms) Redis keeps a grant's record past its window
	lifeArg string // the ttl in µs
	// of is the limiter whose requests the leases serve, whose gate and
	// lastSaid hold the key's fault-path state: the embedded limiter, or,
	// for one limit of a leasedLimits (a part), the exact limiter of all
	// its limits.
	of *redisLimiter
}

// leased returns l deciding from leases when the store has WithLeases and
// l's limits can be leased, nil otherwise.
func (s *Store) leased(l *redisLimiter) algorithms.RateLimiter {
	ttl := s.cfg.redis.leaseTTL
	if ttl == 0 || !leaseable(l.alg, l.limits) {
		return nil
	}
	w := s.leases.start(l.client, l.guard, ttl, s.cfg.redis.leaseBusy)
	if w == nil {
		return nil // closed
	}
	if len(l.limits) > 1 {
		return newLeasedLimits(l, w, ttl)
	}
	return newLeasePart(l, l, w, ttl)
}

// newLeasePart returns the leases of l's one limit, serving the requests
// of of (see leasedLimiter.of), swept by w.
func newLeasePart(l, of *redisLimiter, w *leaseWorker, ttl time.Duration) *leasedLimiter {
	p := ratemath.ParamsFor(l.alg, l.limits[0])
	quota := ratemath.QuotaOf(l.alg, l.limits[0])
	ll := &leasedLimiter{redisLimiter: l, script: redis.NewScript(scripts.Lease(string(l.alg), p.Rate, p.Period, p.Burst, p.Unit)),
		table: newLeaseTable(leaseTableCapacity, w.busy), leases: w, ttl: ttl, most: leaseMost(quota), quota: quota,
		period: ratemath.WindowOf(l.alg, l.limits[0]), keep: l.onceTTL,
		lifeArg: strconv.FormatInt(ttl.Microseconds(), 10), of: of}
	w.add(ll)
	return ll
}

// Allow implements Limiter: from a lease when the key has one, else the
// exact way, asking for a lease in the background when the key is busy.
func (l *leasedLimiter) Allow(ctx context.Context, key string, cost int) (algorithms.Result, error) {
	// The checks CheckRequest makes, of one limit; it says what failed.
	if key == "" || len(key) > algorithms.MaxKeyLength || cost < 1 || cost > l.quota {
		return algorithms.Result{}, ratemath.CheckRequest(l.alg, l.limits, key, cost)
	}
	if l.leases.stopped.Load() { // after Close
		return l.redisLimiter.Allow(ctx, key, cost)
	}
	now := l.guard.leaseNow()
	sp := l.table.spend(key, cost, now, int64(l.ttl), l.most)
	switch sp.outcome {
	case leaseSpent:
		if sp.renew && !l.leases.renew(l, key, sp.want) {
			l.table.unseek(key)
		}
		return algorithms.Result{Allowed: true, Limit: l.quota, Remaining: sp.remaining,
			ResetAfter: time.Duration(max(sp.resetAt-now, 0)), Period: l.period}, nil
	case leaseSeek:
		// The request is decided the exact way, batched with the store's
		// other decisions; when it passes, the key's first lease comes
		// by the renewal path, so that no decision waits for a grant.
		res, err := l.redisLimiter.Allow(ctx, key, cost)
		if err != nil || !res.Allowed || !l.leases.renew(l, key, sp.want) {
			l.table.unseek(key)
		}
		return res, err
	}
	return l.redisLimiter.Allow(ctx, key, cost)
}

// afterFault reports whether key owes Redis what the twin of l.of
// admitted, or is gated after a fault (gate.go): its requests then go the
// exact way, through the gate, and take no lease until its debts have
// landed.
func (l *leasedLimiter) afterFault(key string) bool {
	b := l.guard.batcher
	if b.gated.Load() == 0 {
		return false // nothing owed: a key that owes is gated
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gatedLocked(queueKey{l.of, key}, l.guard.clock())
}

// grantReply is a grant's answer.
type grantReply struct {
	res     algorithms.Result
	granted int
	lasts   time.Duration
}

// parseGrant reads a grant's answer: "<allowed> 1 <remaining> <retry µs>
// <reset µs> <granted> <lease µs>".
func (l *leasedLimiter) parseGrant(reply string) (grantReply, error) {
	var n [7]int64
	f := strings.Fields(reply)
	if len(f) != len(n) {
		return grantReply{}, fmt.Errorf("%w: a lease's grant of %d fields", ErrUnexpectedReply, len(f))
	}
	for i, s := range f {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return grantReply{}, fmt.Errorf("%w: a lease's grant field %d", ErrUnexpectedReply, i)
		}
		n[i] = v
	}
	res := algorithms.Result{Allowed: n[0] == 1, Limit: l.quota, Remaining: int(n[2]),
		RetryAfter: time.Duration(n[3]) * time.Microsecond, ResetAfter: time.Duration(n[4]) * time.Microsecond, Period: l.period}
	return grantReply{res: res, granted: int(n[5]), lasts: time.Duration(n[6]) * time.Microsecond}, nil
}

// install reads the reply of a grant under lease id, sent at sent on the
// store's clock and at sentNS on the leases' (guard.leaseNow), for key,
// and keeps its lease in the table.
func (l *leasedLimiter) install(key, id, reply string, sent time.Time, sentNS int64) error {
	gr, err := l.parseGrant(reply)
	if err != nil {
		return err
	}
	part := l.of != l.redisLimiter
	if !part {
		// Redis's answer, grant counted, is where the twin starts from if
		// Redis cannot answer next: the exact decisions that came before
		// the lease said less. (A part's renewal answers for one limit of
		// several: the exact limiter's decisions keep theirs.)
		l.guard.said.remember(l.redisLimiter, key, sent, gr.res)
	}
	now := l.guard.leaseNow()
	var held heldLease
	var denied int64
	switch {
	case !gr.res.Allowed:
		denied = now + int64(gr.res.RetryAfter)
	case gr.granted == 0:
		// A renewal decides no request, so nothing else would stop a key
		// whose limit has nothing to lease from asking at every request
		// Redis admits: it asks again after a ttl, deciding exactly
		// meanwhile.
		denied = now + int64(l.ttl)
	}
	if gr.granted > 0 {
		// Timed from the sending, before Redis read its clock: the lease
		// ends here no later than there.
		held = heldLease{id: id, left: gr.granted, end: sentNS + int64(gr.lasts), atEnd: gr.lasts < l.ttl}
	}
	l.table.granted(key, held, gr.res.Remaining, now+int64(gr.res.ResetAfter), denied, now)
	return nil
}

// Reset implements RateLimiter: the exact limiter's Reset, after
// forgetting this instance's leases of the key. Leases other instances
// hold of the key stay theirs until they end.
func (l *leasedLimiter) Reset(ctx context.Context, key string) error {
	if err := ratemath.CheckRequest(l.alg, l.limits, key, 1); err != nil {
		return err
	}
	l.table.drop(key)
	return l.redisLimiter.Reset(ctx, key)
}
