package main

import (
	"context"
	"fmt"
	"net/http"
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

// limitsText renders limits as "5/1s + 100/1m0s".
func limitsText(limits []limitSpec) string {
	parts := make([]string, len(limits))
	for i, l := range limits {
		parts[i] = fmt.Sprintf("%d/%s", l.Rate, l.Period)
	}
	return strings.Join(parts, " + ")
}
