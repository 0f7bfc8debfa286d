package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// leaseBatch is the most renewals or returns one pipeline carries.
const leaseBatch = 64

// leaseRenewalsCapacity is the most renewals waiting for the worker; a
// renewal beyond it is not asked for, and the key's next request without
// units asks in a grant of its own.
const leaseRenewalsCapacity = 4096

// leaseRenewal asks for the next lease of key on l, of want units.
type leaseRenewal struct {
	l    *leasedLimiter
	key  string
	want int
}

// leaseWorker is the store's one goroutine for leases: it asks Redis for
// the next leases of busy keys before theirs run out (the renewals queued
// by decisions, leaseBatch to a pipeline), and every sweep (a quarter of
// the ttl, from 10ms to a second) gives back the unspent units of leases
// that ended or whose keys went cold, and forgets the cold keys. A
// decision never waits for it: a key without units meanwhile is decided
// in Redis. Giving back is best effort: a lease not given back ends in
// Redis with its window.
//
// Invariant: Close (stop) ends the goroutine and waits for it, after one
// last sweep gives back every lease it can within one call timeout
// (TestLeasesReachLimit, TestLeaseWorkerStopsOnClose,
// TestLeaseCloseWithRedisStopped). Capacity: leaseRenewalsCapacity renewals
// waiting, leaseReturnsCapacity returns per table shard.
type leaseWorker struct {
	mu        sync.Mutex
	started   bool
	closed    bool
	limiters  []*leasedLimiter
	client    redis.UniversalClient
	guard     *guard
	ttl       time.Duration
	busy      int // where the tables' keys turn busy (leaseTable.busy)
	renewals  chan leaseRenewal
	stopping  chan struct{}
	done      chan struct{}
	flushReqs chan chan struct{} // a sweep now, for tests and Close
	// stopped is set by stop: the limiters then decide in Redis, exactly,
	// with no lease the worker could not give back.
	stopped atomic.Bool
}

// start starts the worker the first time, and returns it, or nil once it
// was stopped. busy is where keys turn busy: 0 for leaseBusy.
func (w *leaseWorker) start(client redis.UniversalClient, g *guard, ttl time.Duration, busy int) *leaseWorker {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	if !w.started {
		w.started, w.client, w.guard, w.ttl, w.busy = true, client, g, ttl, leaseBusy
		if busy > 0 {
			w.busy = busy
		}
		w.renewals = make(chan leaseRenewal, leaseRenewalsCapacity)
		w.stopping, w.done, w.flushReqs = make(chan struct{}), make(chan struct{}), make(chan chan struct{})
		go w.run()
	}
	return w
}

// add has the worker sweep l's table.
func (w *leaseWorker) add(l *leasedLimiter) {
	w.mu.Lock()
	w.limiters = append(w.limiters, l)
	w.mu.Unlock()
}

// renew queues a renewal of key's lease on l; false when the queue is
// full.
func (w *leaseWorker) renew(l *leasedLimiter, key string, want int) bool {
	select {
	case w.renewals <- leaseRenewal{l: l, key: key, want: want}:
		return true
	default:
		return false
	}
}

// stop ends the worker, after it gave back every lease it could, and
// waits for it. A worker never started stops at once.
func (w *leaseWorker) stop() {
	w.stopped.Store(true)
	w.mu.Lock()
	started, closed := w.started, w.closed
	w.closed = true
	w.mu.Unlock()
	if started && !closed {
		close(w.stopping)
	}
	if started {
		<-w.done
	}
}

// flush gives back the unspent units of every lease now, and forgets
// every key; for tests.
func (w *leaseWorker) flush() {
	ack := make(chan struct{})
	select {
	case w.flushReqs <- ack:
		<-ack
	case <-w.done:
	}
}

func (w *leaseWorker) run() {
	defer close(w.done)
	tick := time.NewTicker(min(max(w.ttl/4, 10*time.Millisecond), time.Second))
	defer tick.Stop()
	batch := make([]leaseRenewal, 0, leaseBatch)
	for {
		select {
		case <-w.stopping:
			w.sweep(true)
			return
		case ack := <-w.flushReqs:
			w.sweep(true)
			close(ack)
		case <-tick.C:
			w.sweep(false)
		case r := <-w.renewals:
			batch = append(batch[:0], r)
		more:
			for len(batch) < leaseBatch {
				select {
				case r := <-w.renewals:
					batch = append(batch, r)
				default:
					break more
				}
			}
			w.renewAll(batch)
		}
	}
}

// limitersNow returns the limiters to sweep.
func (w *leaseWorker) limitersNow() []*leasedLimiter {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*leasedLimiter(nil), w.limiters...)
}

// sweep gives back what the tables queued (all: every lease), within one
// call timeout for the whole sweep: returns it has no time for are not
// sent, and their leases end in Redis.
func (w *leaseWorker) sweep(all bool) {
	ctx, cancel := context.WithTimeout(context.Background(), w.guard.callTimeout())
	defer cancel()
	var returns []leaseReturn
	for _, l := range w.limitersNow() {
		returns = l.table.sweep(returns[:0], w.guard.leaseNow(), int64(w.ttl), all)
		for len(returns) > 0 && ctx.Err() == nil {
			n := min(len(returns), leaseBatch)
			chunk := returns[:n]
			sendPipelined(ctx, w.client, len(chunk), func(p redis.Pipeliner, i int, eval bool) *redis.Cmd {
				return l.runLease(ctx, p, eval, l.leaseKeys(chunk[i].key), returnArgs(chunk[i].id, chunk[i].left)...)
			})
			returns = returns[n:]
		}
	}
}

// renewAll sends the grants of batch in one pipeline and keeps their
// leases. It sends none while the breaker is not closed, nor for a key
// gated after a fault: that key owes Redis what its twin admitted, and a
// lease from a count that lacks it would admit it again.
func (w *leaseWorker) renewAll(batch []leaseRenewal) {
	closed, n := w.guard.breaker.Closed(), 0
	for _, r := range batch {
		if closed && !r.l.afterFault(r.key) {
			batch[n], n = r, n+1
		} else {
			r.l.table.unseek(r.key)
		}
	}
	if batch = batch[:n]; n == 0 {
		return
	}
	ids := make([]string, len(batch))
	for i, r := range batch {
		ids[i] = r.l.leaseID()
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.guard.callTimeout())
	defer cancel()
	sent, sentNS := w.guard.clock(), w.guard.leaseNow()
	cmds := sendPipelined(ctx, w.client, len(batch), func(p redis.Pipeliner, i int, eval bool) *redis.Cmd {
		r := batch[i]
		return r.l.runLease(ctx, p, eval, r.l.leaseKeys(r.key), r.l.grantArgs(ids[i], 0, r.want)...)
	})
	failed := false
	for i, r := range batch {
		reply, err := cmds[i].Text()
		if err == nil {
			err = r.l.install(r.key, ids[i], reply, sent, sentNS)
		}
		if err != nil {
			failed = true
			r.l.table.unseek(r.key)
		}
	}
	w.guard.breaker.Record(w.guard.clock(), !failed, false)
}
