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
	"sync/atomic"
	"time"
)

// tally counts one worker's responses; workers merge theirs at the end.
type tally struct {
	statuses   map[int]int64
	errors     int64
	errSamples map[string]int64 // error text → count, a few kinds at most
	latencies  []time.Duration  // of the requests that got a response
}

func newTally() *tally {
	return &tally{statuses: map[int]int64{}, errSamples: map[string]int64{}}
}

// maxErrKinds bounds the distinct error texts kept.
const maxErrKinds = 5

func (t *tally) record(status int, lat time.Duration, err error) {
	if err != nil {
		t.errors++
		msg := err.Error()
		if _, ok := t.errSamples[msg]; ok || len(t.errSamples) < maxErrKinds {
			t.errSamples[msg]++
		}
		return
	}
	t.statuses[status]++
	t.latencies = append(t.latencies, lat)
}

func (t *tally) merge(o *tally) {
	for s, n := range o.statuses {
		t.statuses[s] += n
	}
	t.errors += o.errors
	for m, n := range o.errSamples {
		if _, ok := t.errSamples[m]; ok || len(t.errSamples) < maxErrKinds {
			t.errSamples[m] += n
		}
	}
	t.latencies = append(t.latencies, o.latencies...)
}

// report is one scenario's table and what it found wrong.
type report struct {
	title    string
	rows     [][2]string
	failures []string
}

func (r *report) add(label, format string, args ...any) {
	r.rows = append(r.rows, [2]string{label, fmt.Sprintf(format, args...)})
}

func (r *report) fail(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// print writes the table to sb as plain text.
func (r *report) print(sb *strings.Builder) {
	width := 0
	for _, row := range r.rows {
		width = max(width, len(row[0]))
	}
	fmt.Fprintf(sb, "%s\n%s\n", r.title, strings.Repeat("-", len(r.title)))
	for _, row := range r.rows {
		fmt.Fprintf(sb, "  %-*s  %s\n", width, row[0], row[1])
	}
	if len(r.failures) == 0 {
		fmt.Fprintf(sb, "  %-*s  %s\n", width, "result", "PASS")
	} else {
		fmt.Fprintf(sb, "  %-*s  %s\n", width, "result", "FAIL")
		for _, f := range r.failures {
			fmt.Fprintf(sb, "    - %s\n", f)
		}
	}
}

// addCommon adds the rows both scenarios share: statuses, errors, latency,
// throughput and Redis commands, and fails on errors and unexpected
// statuses.
func (r *report) addCommon(t *tally, elapsed time.Duration, before, after map[string]int64) {
	var total, other, server int64
	var others []string
	for s, n := range t.statuses {
		total += n
		if s != http.StatusOK && s != http.StatusTooManyRequests {
			other += n
			others = append(others, fmt.Sprintf("%d: %d", s, n))
			if s >= 500 {
				server += n
			}
		}
	}
	slices.Sort(others)
	requests := total + t.errors
	r.add("requests sent", "%d", requests)
	r.add("requests/s", "%.0f (over %s)", float64(requests)/elapsed.Seconds(), elapsed.Round(time.Millisecond))
	r.add("200 admitted", "%d", t.statuses[http.StatusOK])
	r.add("429 denied", "%d", t.statuses[http.StatusTooManyRequests])
	if len(others) == 0 {
		r.add("other statuses", "0")
	} else {
		r.add("other statuses", "%d (%s)", other, strings.Join(others, ", "))
	}
	r.add("errors (no response)", "%d", t.errors)
	for m, n := range t.errSamples {
		r.add("  error", "%d x %s", n, m)
	}
	slices.Sort(t.latencies)
	r.add("latency p50 / p99 / max", "%s / %s / %s", roundLatency(percentile(t.latencies, 50)),
		roundLatency(percentile(t.latencies, 99)), roundLatency(percentile(t.latencies, 100)))
	scripts := scriptCalls(after) - scriptCalls(before)
	all := allCalls(after) - allCalls(before)
	per := func(n int64) float64 {
		if requests == 0 {
			return 0
		}
		return float64(n) / float64(requests)
	}
	r.add("Redis script calls", "%d evalsha+eval = %.4f per HTTP request", scripts, per(scripts))
	r.add("Redis commands, all", "%d = %.4f per HTTP request (those scripts run included, INFO not)", all, per(all))

	if t.errors > 0 {
		r.fail("%d requests got no response", t.errors)
	}
	if server > 0 {
		r.fail("%d responses were 5xx", server)
	}
	if other > server {
		r.fail("%d responses were neither 200, 429 nor 5xx", other-server)
	}
}

func roundLatency(d time.Duration) time.Duration {
	if d >= 10*time.Millisecond {
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// scenario holds what both scenarios need.
type scenario struct {
	cl        *clients
	cluster   *cluster
	instances int
	duration  time.Duration
	workers   int
}

// flood has one client send GET path from every worker, round-robin over
// the instances, for the scenario's duration.
func (s *scenario) flood(ctx context.Context, path, alg string, limits []limitSpec) (*report, error) {
	src, err := clientAddr(200, 0)
	if err != nil {
		return nil, err
	}
	before, err := s.cluster.commandCalls(ctx)
	if err != nil {
		return nil, err
	}
	var next atomic.Uint64
	tallies := make([]*tally, s.workers)
	start := time.Now()
	deadline := start.Add(s.duration)
	var wg sync.WaitGroup
	for w := range tallies {
		t := newTally()
		tallies[w] = t
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(deadline) {
				inst := int(next.Add(1) % uint64(s.instances))
				t.record(s.cl.do(ctx, src, inst, path, false))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	after, err := s.cluster.commandCalls(ctx)
	if err != nil {
		return nil, err
	}
	t := newTally()
	for _, o := range tallies {
		t.merge(o)
	}
	s.cl.closeIdle()

	r := &report{title: fmt.Sprintf("Scenario 1: one-key flood, GET %s (%s %s, per client IP)", path, alg, limitsText(limits))}
	r.add("client", "%s, one client from %d workers, round-robin over %d instances", src, s.workers, s.instances)
	r.addCommon(t, elapsed, before, after)
	admitted := t.statuses[http.StatusOK]
	// Every decision for this client lies between the first request sent
	// (after start) and the last response (before elapsed).
	allowed := allowedBy(limits, elapsed+clockSlack)
	r.add("limit allows", "%s (span %s + %s slack)", describeBound(limits, elapsed+clockSlack), elapsed.Round(time.Millisecond), clockSlack)
	r.add("admitted vs allowed", "%d of %d", admitted, allowed)
	if admitted > allowed {
		r.fail("client %s was admitted %d times, more than the %d its limit allows over %s", src, admitted, allowed, elapsed.Round(time.Millisecond))
	}
	return r, nil
}

// spreadStats is what one client of the spread saw.
type spreadStats struct {
	served   bool
	admitted int32
	span     time.Duration // first request sent to last response read
	lag      time.Duration // how late its first request left, against its schedule
}

// spread has identities clients each send perClient requests to GET path,
// one after another and round-robin over the instances, starting at a
// random moment of the first 90% of the duration. The workers bound how
// many clients are served at once; a client whose turn comes after the
// duration is not served at all.
func (s *scenario) spread(ctx context.Context, path, alg string, limits []limitSpec, identities, perClient int, seed uint64) (*report, error) {
	addrs := make([]netip.Addr, identities)
	for i := range addrs {
		a, err := clientAddr(1, i)
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	window := s.duration * 9 / 10
	offsets := make([]time.Duration, identities)
	for i := range offsets {
		offsets[i] = time.Duration(rng.Int64N(int64(window)))
	}
	order := make([]int, identities)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(offsets[a], offsets[b]) })

	before, err := s.cluster.commandCalls(ctx)
	if err != nil {
		return nil, err
	}
	stats := make([]spreadStats, identities)
	tallies := make([]*tally, s.workers)
	start := time.Now()
	deadline := start.Add(s.duration)
	work := make(chan int)
	go func() {
		defer close(work)
		dctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		for _, id := range order {
			if wait := time.Until(start.Add(offsets[id])); wait > 0 {
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
	}()
	var wg sync.WaitGroup
	for w := range tallies {
		t := newTally()
		tallies[w] = t
		wg.Go(func() {
			for id := range work {
				st := &stats[id]
				first := time.Now()
				st.served, st.lag = true, first.Sub(start.Add(offsets[id]))
				for k := range perClient {
					inst := (id + k) % s.instances
					// The last request to each instance closes its connection:
					// this client will not come back.
					status, lat, err := s.cl.do(ctx, addrs[id], inst, path, k+s.instances >= perClient)
					t.record(status, lat, err)
					if err == nil && status == http.StatusOK {
						st.admitted++
					}
				}
				st.span = time.Since(first)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	after, err := s.cluster.commandCalls(ctx)
	if err != nil {
		return nil, err
	}
	t := newTally()
	for _, o := range tallies {
		t.merge(o)
	}
	s.cl.closeIdle()

	r := &report{title: fmt.Sprintf("Scenario 2: %d-key spread, GET %s (%s %s, per client IP)", identities, path, alg, limitsText(limits))}
	var served, over, overExact int
	var maxAdmitted, minAdmitted int32 = 0, -1
	var maxAllowed, minAllowed int64 = 0, -1
	var maxSpan time.Duration
	var lags []time.Duration
	hist := map[int32]int{}
	var worst []string
	for i, st := range stats {
		if !st.served {
			continue
		}
		served++
		lags = append(lags, st.lag)
		hist[st.admitted]++
		maxAdmitted = max(maxAdmitted, st.admitted)
		if minAdmitted < 0 || st.admitted < minAdmitted {
			minAdmitted = st.admitted
		}
		maxSpan = max(maxSpan, st.span)
		allowed := allowedBy(limits, st.span+clockSlack)
		maxAllowed = max(maxAllowed, allowed)
		if minAllowed < 0 || allowed < minAllowed {
			minAllowed = allowed
		}
		if int64(st.admitted) > allowed {
			overExact++
		}
		if bound := allowed + localAllowance(limits, s.instances, st.span+clockSlack); int64(st.admitted) > bound {
			over++
			if len(worst) < 5 {
				worst = append(worst, fmt.Sprintf("%s admitted %d > %d allowed over %s", addrs[i], st.admitted, bound, st.span.Round(time.Microsecond)))
			}
		}
	}
	slices.Sort(lags)
	r.add("clients", "%d of %d served (%d workers; %d requests each, one after another, round-robin over %d instances)",
		served, identities, s.workers, perClient, s.instances)
	r.add("client addresses", "%s .. %s", addrs[0], addrs[identities-1])
	r.add("start lag p50 / p99 / max", "%s / %s / %s (how late clients began against a uniform schedule over %s)",
		roundLatency(percentile(lags, 50)), roundLatency(percentile(lags, 99)), roundLatency(percentile(lags, 100)), window)
	r.addCommon(t, elapsed, before, after)
	var keys []int32
	for k := range hist {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var hparts []string
	for _, k := range keys {
		hparts = append(hparts, fmt.Sprintf("%d admitted: %d clients", k, hist[k]))
	}
	r.add("admitted per client", "min %d, max %d (%s)", max(minAdmitted, 0), maxAdmitted, strings.Join(hparts, "; "))
	r.add("allowed per client", "min %d, max %d over each client's own span (longest %s); e.g. %s",
		max(minAllowed, 0), maxAllowed, maxSpan.Round(time.Microsecond), describeBound(limits, maxSpan+clockSlack))
	r.add("allowed over the run", "%s (span %s + %s slack)", describeBound(limits, elapsed+clockSlack), elapsed.Round(time.Millisecond), clockSlack)
	r.add("clients over the exact bound", "%d (admitted beyond what Redis allows: decided locally, within the instances' shares, when Redis could not decide in time)", overExact)
	r.add("clients over the bound", "%d (the exact bound plus %d instances' local shares, %s)", over, s.instances, limitsText(shareOf(limits, s.instances)))
	if served < identities {
		r.add("note", "%d clients were not served before the duration ended: the machine could not keep up", identities-served)
	}
	if runAllowed := allowedBy(limits, elapsed+clockSlack); int64(maxAdmitted) > runAllowed {
		r.fail("a client was admitted %d times, more than the %d its limits allow over the whole run", maxAdmitted, runAllowed)
	}
	if over > 0 {
		r.fail("%d clients were admitted more than their limits and the instances' local shares allow over their own span, e.g. %s", over, strings.Join(worst, "; "))
	}
	return r, nil
}

// limitsText renders limits as "5/1s + 100/1m0s".
func limitsText(limits []limitSpec) string {
	parts := make([]string, len(limits))
	for i, l := range limits {
		parts[i] = fmt.Sprintf("%d/%s", l.Rate, l.Period)
	}
	return strings.Join(parts, " + ")
}
