package main

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// limitSpec is one limit of a route: at most Rate requests per Period.
type limitSpec struct {
	Rate   int
	Period time.Duration
}

// clockSlack is added to a measured span before it is turned into a bound,
// so that the bound stays an upper bound when the client's clock and the
// Redis server's, both this machine's but read through different calls
// (Go's monotonic clock, gettimeofday in Redis), disagree by a little.
const clockSlack = time.Millisecond

// allowedBy returns the most requests that limits, all enforced together,
// can admit to one client whose admitted requests were all decided within a
// span of d; the client's key must have had no state before the span.
//
// Why rate × (⌊d/period⌋ + 1) for one limit. The example's routes under test
// use the fixed window and the sliding window counter, and in redlimit's
// scripts both start the first window of a fresh key at that key's first
// admitted request, on the Redis server's clock (TIME), and never admit more
// than rate requests in one window:
//
//   - fixed window: a window ends period after it started, and the next one
//     starts with the first request at or after that end, which is admitted
//     (cost 1 ≤ rate). So the windows that admitted something start at
//     admission times at least period apart.
//   - sliding window counter: windows follow each other, period long, from
//     the key's first admission; a new series starts, at an admission,
//     only after a whole window went by with nothing admitted. The current
//     window's count never exceeds rate, since the weighted count it is
//     compared with includes it. So the windows that admitted something are
//     disjoint, each period long, and the first starts at the first
//     admission.
//
// With n such windows, the first n-1 lie whole between the first admission
// and the last, so (n-1) × period ≤ d and n ≤ ⌊d/period⌋ + 1. A request
// counts against every limit or none, so the tightest limit bounds the
// whole.
//
// The looser rate × ⌈d/period + 1⌉ (= rate × (⌈d/period⌉ + 1)) is what
// holds for windows that need not start at an admission, such as windows
// aligned to the clock or a key that had state before the span began: there
// the first window can begin before the span. For d = 15 s and 60/min it
// allows 120 where the scripts allow 60; the tighter bound catches an
// over-admission that the looser one would let through.
//
// The callers measure d on the client, from sending the client's first
// request to receiving its last response, which contains every moment
// Redis decided one of them (plus clockSlack).
func allowedBy(limits []limitSpec, d time.Duration) int64 {
	best := int64(-1)
	for _, l := range limits {
		n := int64(l.Rate) * (int64(d/l.Period) + 1)
		if best < 0 || n < best {
			best = n
		}
	}
	return best
}

// localAllowance is what the instances may admit on their own, beyond
// what Redis allows, over d: while Redis cannot decide in time (an
// overloaded machine, a request whose turn did not come by its deadline),
// each of the instances decides with its share of every limit (the
// example's -instances: Rate divided by n, rounded down, at least 1), and
// a request so admitted is charged in Redis only if Redis still has room.
func localAllowance(limits []limitSpec, instances int, d time.Duration) int64 {
	return int64(instances) * allowedBy(shareOf(limits, instances), d)
}

// shareOf is one instance's share of limits.
func shareOf(limits []limitSpec, instances int) []limitSpec {
	share := make([]limitSpec, len(limits))
	for i, l := range limits {
		share[i] = limitSpec{Rate: max(1, l.Rate/instances), Period: l.Period}
	}
	return share
}

// describeBound shows the computation of allowedBy(limits, d), e.g.
// "60*(floor(15.0s/1m0s)+1) = 60".
func describeBound(limits []limitSpec, d time.Duration) string {
	parts := make([]string, len(limits))
	for i, l := range limits {
		parts[i] = fmt.Sprintf("%d*(floor(%s/%s)+1)", l.Rate, d.Round(time.Millisecond), l.Period)
	}
	s := strings.Join(parts, ", ")
	if len(limits) > 1 {
		s = "min(" + s + ")"
	}
	return fmt.Sprintf("%s = %d", s, allowedBy(limits, d))
}

// percentile returns the p-th percentile, 1 ≤ p ≤ 100, of sorted (ascending)
// by the nearest-rank method: the smallest value that at least p% of the
// values are at or below. It returns 0 for no values.
func percentile(sorted []time.Duration, p int) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := (p*n + 99) / 100 // ⌈p × n / 100⌉, in integers so 99% of 100 is 99
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// clientAddr returns the source address of client i (from 0) of a scenario
// whose addresses start at 127.first.0.1. The last octet runs over 1..254,
// so that no client ends in .0 or .255, then the third and the second octet
// carry: 65,024 clients per value of the second octet.
func clientAddr(first, i int) (netip.Addr, error) {
	if first < 1 || first > 254 || i < 0 {
		return netip.Addr{}, fmt.Errorf("client %d of block %d: out of range", i, first)
	}
	c := 1 + i%254
	i /= 254
	b := i % 256
	a := first + i/256
	if a > 254 {
		return netip.Addr{}, fmt.Errorf("client %d of block %d: past 127.254.255.254", i, first)
	}
	return netip.AddrFrom4([4]byte{127, byte(a), byte(b), byte(c)}), nil
}

// hostFor names the connection pool of one client and one instance: a
// made-up host name that the transport keys its idle connections by, and
// that dial turns back into the client's source address and the instance.
// So one shared transport keeps each client's keep-alive connections apart
// from every other client's. Example: "127-1-0-5.i2.loadtest".
func hostFor(src netip.Addr, instance int) string {
	return strings.ReplaceAll(src.String(), ".", "-") + ".i" + strconv.Itoa(instance) + ".loadtest"
}

// parseHost reverses hostFor.
func parseHost(host string) (netip.Addr, int, error) {
	rest, ok := strings.CutSuffix(host, ".loadtest")
	ip, inst, ok2 := strings.Cut(rest, ".i")
	if !ok || !ok2 {
		return netip.Addr{}, 0, fmt.Errorf("host %q is not a load-test client host", host)
	}
	a, err := netip.ParseAddr(strings.ReplaceAll(ip, "-", "."))
	if err != nil || !a.Is4() {
		return netip.Addr{}, 0, fmt.Errorf("host %q: bad client address", host)
	}
	n, err := strconv.Atoi(inst)
	if err != nil || n < 0 {
		return netip.Addr{}, 0, fmt.Errorf("host %q: bad instance", host)
	}
	return a, n, nil
}

// parseCommandStats returns the calls per command from the reply of
// INFO commandstats: lines such as "cmdstat_evalsha:calls=12,usec=340,...".
func parseCommandStats(info string) map[string]int64 {
	calls := map[string]int64{}
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		name, fields, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || len(name) == len(line) {
			continue
		}
		for f := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					calls[name] = n
				}
			}
		}
	}
	return calls
}

// scriptCalls is the number of script calls in calls: EVALSHA, and EVAL,
// which go-redis sends when the server does not know the script yet.
func scriptCalls(calls map[string]int64) int64 {
	return calls["evalsha"] + calls["eval"]
}

// allCalls is the number of commands in calls, those that scripts run
// included, but not INFO, which only this program sends.
func allCalls(calls map[string]int64) int64 {
	var n int64
	for name, c := range calls {
		if name != "info" {
			n += c
		}
	}
	return n
}
