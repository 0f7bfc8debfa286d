package main

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// spreadStats is what one client of the spread saw.
type spreadStats struct {
	served   bool
	admitted int32
	span     time.Duration // first request sent to last response read
	lag      time.Duration // how late its first request left, against its schedule
}

// spreadPlan is who the spread's clients are and when each starts.
type spreadPlan struct {
	addrs   []netip.Addr
	window  time.Duration   // the clients start within it
	offsets []time.Duration // each client's start, from the run's
	order   []int           // clients by start
}

// spread has identities clients each send perClient requests to GET path,
// one after another and round-robin over the instances, starting at a
// random moment of the first 90% of the duration. The workers bound how
// many clients are served at once; a client whose turn comes after the
// duration is not served at all.
func (s *scenario) spread(ctx context.Context, path, alg string, limits []limitSpec, identities, perClient int, seed uint64) (*report, error) {
	plan, err := planSpread(identities, s.duration*9/10, seed)
	if err != nil {
		return nil, err
	}
	before, err := s.cluster.commandCalls(ctx)
	if err != nil {
		return nil, err
	}
	stats, t, elapsed := s.runSpread(ctx, plan, path, perClient)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	after, err := s.cluster.commandCalls(ctx)
	if err != nil {
		return nil, err
	}
	s.cl.closeIdle()

	r := &report{title: fmt.Sprintf("Scenario 2: %d-key spread, GET %s (%s %s, per client IP)", identities, path, alg, limitsText(limits))}
	sum := summarizeSpread(stats, plan.addrs, limits, s.instances)
	r.add("clients", "%d of %d served (%d workers; %d requests each, one after another, round-robin over %d instances)",
		sum.served, identities, s.workers, perClient, s.instances)
	r.add("client addresses", "%s .. %s", plan.addrs[0], plan.addrs[identities-1])
	r.add("start lag p50 / p99 / max", "%s / %s / %s (how late clients began against a uniform schedule over %s)",
		roundLatency(percentile(sum.lags, 50)), roundLatency(percentile(sum.lags, 99)), roundLatency(percentile(sum.lags, 100)), plan.window)
	r.addCommon(t, elapsed, before, after)
	r.addSpreadBounds(sum, limits, elapsed, s.instances)
	if sum.served < identities {
		r.add("note", "%d clients were not served before the duration ended: the machine could not keep up", identities-sum.served)
	}
	if runAllowed := allowedBy(limits, elapsed+clockSlack); int64(sum.maxAdmitted) > runAllowed {
		r.fail("a client was admitted %d times, more than the %d its limits allow over the whole run", sum.maxAdmitted, runAllowed)
	}
	if sum.over > 0 {
		r.fail("%d clients were admitted more than their limits and the instances' local shares allow over their own span, e.g. %s", sum.over, strings.Join(sum.worst, "; "))
	}
	return r, nil
}

// planSpread gives identities clients their own source addresses and a
// random start within window, drawn from seed.
func planSpread(identities int, window time.Duration, seed uint64) (spreadPlan, error) {
	p := spreadPlan{addrs: make([]netip.Addr, identities), window: window}
	for i := range p.addrs {
		a, err := clientAddr(1, i)
		if err != nil {
			return p, err
		}
		p.addrs[i] = a
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p.offsets = make([]time.Duration, identities)
	for i := range p.offsets {
		p.offsets[i] = time.Duration(rng.Int64N(int64(window)))
	}
	p.order = make([]int, identities)
	for i := range p.order {
		p.order[i] = i
	}
	slices.SortStableFunc(p.order, func(a, b int) int { return cmp.Compare(p.offsets[a], p.offsets[b]) })
	return p, nil
}

// runSpread hands the clients to the workers on plan's schedule until the
// duration ends, and returns what each client saw, the merged tally and
// the time it took.
func (s *scenario) runSpread(ctx context.Context, plan spreadPlan, path string, perClient int) ([]spreadStats, *tally, time.Duration) {
	stats := make([]spreadStats, len(plan.addrs))
	tallies := make([]*tally, s.workers)
	start := time.Now()
	work := make(chan int)
	go schedule(ctx, plan, start, start.Add(s.duration), work)
	var wg sync.WaitGroup
	for w := range tallies {
		t := newTally()
		tallies[w] = t
		wg.Go(func() {
			for id := range work {
				st := &stats[id]
				first := time.Now()
				st.served, st.lag = true, first.Sub(start.Add(plan.offsets[id]))
				s.serveClient(ctx, plan.addrs[id], id, path, perClient, st, t)
				st.span = time.Since(first)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	t := newTally()
	for _, o := range tallies {
		t.merge(o)
	}
	return stats, t, elapsed
}

// schedule sends each client of plan to work at its start, in order, and
// closes work at the deadline or once all are sent.
func schedule(ctx context.Context, plan spreadPlan, start, deadline time.Time, work chan<- int) {
	defer close(work)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for _, id := range plan.order {
		if wait := time.Until(start.Add(plan.offsets[id])); wait > 0 {
			select {
			case <-time.After(wait):
			case <-dctx.Done():
				return
			}
		}
		select {
		case work <- id:
		case <-dctx.Done():
			return
		}
	}
}

// serveClient sends client id's perClient requests from src, one after
// another, round-robin over the instances, counting its admissions in st.
func (s *scenario) serveClient(ctx context.Context, src netip.Addr, id int, path string, perClient int, st *spreadStats, t *tally) {
	for k := range perClient {
		inst := (id + k) % s.instances
		// The last request to each instance closes its connection: this
		// client will not come back.
		status, lat, err := s.cl.do(ctx, src, inst, path, k+s.instances >= perClient)
		t.record(status, lat, err)
		if err == nil && status == http.StatusOK {
			st.admitted++
		}
	}
}

// spreadSummary is what the served clients of the spread saw, against
// what their limits allow over each one's own span.
type spreadSummary struct {
	served, over, overExact  int
	maxAdmitted, minAdmitted int32
	maxAllowed, minAllowed   int64
	maxSpan                  time.Duration
	lags                     []time.Duration // sorted
	hist                     map[int32]int   // admissions → clients
	worst                    []string        // a few clients over the bound
}

func summarizeSpread(stats []spreadStats, addrs []netip.Addr, limits []limitSpec, instances int) spreadSummary {
	sum := spreadSummary{minAdmitted: -1, minAllowed: -1, hist: map[int32]int{}}
	for i, st := range stats {
		if !st.served {
			continue
		}
		sum.served++
		sum.lags = append(sum.lags, st.lag)
		sum.hist[st.admitted]++
		sum.maxAdmitted = max(sum.maxAdmitted, st.admitted)
		if sum.minAdmitted < 0 || st.admitted < sum.minAdmitted {
			sum.minAdmitted = st.admitted
		}
		sum.maxSpan = max(sum.maxSpan, st.span)
		allowed := allowedBy(limits, st.span+clockSlack)
		sum.maxAllowed = max(sum.maxAllowed, allowed)
		if sum.minAllowed < 0 || allowed < sum.minAllowed {
			sum.minAllowed = allowed
		}
		if int64(st.admitted) > allowed {
			sum.overExact++
		}
		if bound := allowed + localAllowance(limits, instances, st.span+clockSlack); int64(st.admitted) > bound {
			sum.over++
			if len(sum.worst) < 5 {
				sum.worst = append(sum.worst, fmt.Sprintf("%s admitted %d > %d allowed over %s", addrs[i], st.admitted, bound, st.span.Round(time.Microsecond)))
			}
		}
	}
	slices.Sort(sum.lags)
	return sum
}

// addSpreadBounds adds the rows of what the clients were admitted against
// what their limits allow.
func (r *report) addSpreadBounds(sum spreadSummary, limits []limitSpec, elapsed time.Duration, instances int) {
	var keys []int32
	for k := range sum.hist {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var hparts []string
	for _, k := range keys {
		hparts = append(hparts, fmt.Sprintf("%d admitted: %d clients", k, sum.hist[k]))
	}
	r.add("admitted per client", "min %d, max %d (%s)", max(sum.minAdmitted, 0), sum.maxAdmitted, strings.Join(hparts, "; "))
	r.add("allowed per client", "min %d, max %d over each client's own span (longest %s); e.g. %s",
		max(sum.minAllowed, 0), sum.maxAllowed, sum.maxSpan.Round(time.Microsecond), describeBound(limits, sum.maxSpan+clockSlack))
	r.add("allowed over the run", "%s (span %s + %s slack)", describeBound(limits, elapsed+clockSlack), elapsed.Round(time.Millisecond), clockSlack)
	r.add("clients over the exact bound", "%d (admitted beyond what Redis allows: decided locally, within the instances' shares, when Redis could not decide in time)", sum.overExact)
	r.add("clients over the bound", "%d (the exact bound plus %d instances' local shares, %s)", sum.over, instances, limitsText(shareOf(limits, instances)))
}
