package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/bench/internal/subjects"
)

// figures holds the medians of the compare section by middleware and g.
type figures map[string]map[int]record

func figuresOf(recs []record) figures {
	f := figures{}
	for _, r := range recs {
		if f[r.Middleware] == nil {
			f[r.Middleware] = map[int]record{}
		}
		f[r.Middleware][r.G] = r
	}
	return f
}

// get returns pick of name's record at g, NaN when there is none.
func (f figures) get(name string, g int, pick func(record) float64) float64 {
	r, ok := f[name][g]
	if !ok {
		return math.NaN()
	}
	return pick(r)
}

func nsPerOp(r record) float64     { return r.NsPerOp }
func reqPerSec(r record) float64   { return r.ReqPerSec }
func redisMicros(r record) float64 { return r.RedisMicros }
func allocs(r record) float64      { return r.AllocsPerOp }

// targetColumn is one figure of a redlimit row, with the bound it should
// meet, if any.
type targetColumn struct {
	header string
	value  func(name string) float64 // NaN when not measured
	places int
	unit   string
	bound  float64
	atMost bool // the target is value ≤ bound; otherwise value ≥ bound
	target bool
	// spoiled, if not nil, says why a row's figure does not measure what
	// the target is about (requests refused, decisions made by stand-ins):
	// a target is then missed whatever the figure. "" when it does.
	spoiled func(name string) string
}

// cell renders v, marked ✓ or ✗ against the target, which is judged on
// the value as shown.
func (c targetColumn) cell(v float64) (text string, met, judged bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–", false, false
	}
	shown, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', c.places, 64), 64)
	text = strconv.FormatFloat(shown, 'f', c.places, 64) + c.unit
	if !c.target {
		return text, false, false
	}
	met = shown >= c.bound
	if c.atMost {
		met = shown <= c.bound
	}
	if met {
		return text + " ✓", true, true
	}
	return text + " ✗", false, true
}

// targetTable has a row for each name and a column for each of cols,
// and a last one counting the targets met of those measured.
func targetTable(names []string, cols []targetColumn) *table {
	t := &table{header: []string{"middleware"}}
	for _, c := range cols {
		t.header = append(t.header, c.header)
	}
	t.header = append(t.header, "targets met")
	for _, name := range names {
		row := []string{name}
		met, judged := 0, 0
		for _, c := range cols {
			text, ok, j := c.cell(c.value(name))
			if j && c.spoiled != nil {
				if why := c.spoiled(name); why != "" {
					text, ok = strings.TrimSuffix(strings.TrimSuffix(text, " ✓"), " ✗")+" ✗ ("+why+")", false
				}
			}
			row = append(row, text)
			if j {
				judged++
			}
			if ok {
				met++
			}
		}
		t.add(append(row, fmt.Sprintf("%d of %d", met, judged))...)
	}
	return t
}

// quotient is a / b, NaN unless b is positive.
func quotient(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) || b <= 0 {
		return math.NaN()
	}
	return a / b
}

// redisTargets is redlimit's Redis store against the floor and the Redis
// peers, at the lowest g (lo) and the reference one (ref).
func redisTargets(f figures, lo, ref int) *table {
	by := func(name, peer string, g int, pick func(record) float64) float64 {
		return quotient(f.get(name, g, pick), f.get(peer, g, pick))
	}
	cols := []targetColumn{
		{header: fmt.Sprintf("g=%d ns/op ÷ floor", lo), places: 2, unit: "×",
			value: func(n string) float64 { return by(n, subjects.FloorName, lo, nsPerOp) }},
		{header: fmt.Sprintf("g=%d ns/op ÷ ulule/limiter (≤ 1.00)", lo), places: 2, unit: "×", bound: 1, atMost: true, target: true,
			value: func(n string) float64 { return by(n, subjects.UluleRedisName, lo, nsPerOp) }},
		{header: fmt.Sprintf("g=%d ns/op ÷ go-redis/redis_rate", lo), places: 2, unit: "×",
			value: func(n string) float64 { return by(n, subjects.RedisRateName, lo, nsPerOp) }},
		{header: fmt.Sprintf("g=%d redis CPU ÷ go-redis/redis_rate (≤ 1.00)", lo), places: 2, unit: "×", bound: 1, atMost: true, target: true,
			value: func(n string) float64 { return by(n, subjects.RedisRateName, lo, redisMicros) }},
		{header: fmt.Sprintf("g=%d req/s ÷ go-redis/redis_rate (≥ 2)", ref), places: 2, unit: "×", bound: 2, target: true,
			value: func(n string) float64 { return by(n, subjects.RedisRateName, ref, reqPerSec) }},
		{header: fmt.Sprintf("g=%d redis CPU µs/decision (≤ 6)", ref), places: 1, bound: 6, atMost: true, target: true,
			value: func(n string) float64 { return f.get(n, ref, redisMicros) }},
	}
	var names []string
	for _, alg := range algorithms.All() {
		if name := subjects.RedlimitRedisSubject(alg, "").Name; f[name] != nil {
			names = append(names, name)
		}
	}
	return targetTable(names, cols)
}

// memoryTargets is redlimit's memory store's overhead over the bare
// handler against go-chi/httprate's, and its allocations.
func memoryTargets(f figures, lo, ref int) *table {
	overhead := func(name string, g int) float64 {
		return f.get(name, g, nsPerOp) - f.get(subjects.Bare.Name, g, nsPerOp)
	}
	byHTTPRate := func(name string, g int) float64 {
		return quotient(overhead(name, g), overhead(subjects.HTTPRateMemoryName, g))
	}
	cols := []targetColumn{
		{header: fmt.Sprintf("g=%d overhead ÷ go-chi/httprate (≤ 0.50)", ref), places: 2, unit: "×", bound: 0.5, atMost: true, target: true,
			value: func(n string) float64 { return byHTTPRate(n, ref) }},
		{header: fmt.Sprintf("g=%d overhead ÷ go-chi/httprate (≤ 0.50)", lo), places: 2, unit: "×", bound: 0.5, atMost: true, target: true,
			value: func(n string) float64 { return byHTTPRate(n, lo) }},
		{header: fmt.Sprintf("g=%d allocs/op (≤ 8)", ref), places: 0, bound: 8, atMost: true, target: true,
			value: func(n string) float64 { return f.get(n, ref, allocs) }},
	}
	var names []string
	for _, alg := range algorithms.All() {
		if name := subjects.RedlimitSubject(alg, nil, "").Name; f[name] != nil {
			names = append(names, name)
		}
	}
	// For scale: the same fields go-chi/httprate sends, and the five
	// fields written with nothing decided.
	for _, name := range []string{subjects.RedlimitSubject(algorithms.FixedWindow, nil, subjects.ThreeHeaders).Name, subjects.HeadersFloorName} {
		if f[name] != nil {
			names = append(names, name)
		}
	}
	return targetTable(names, cols)
}

// targetNotes gives the figures the ratios divide by.
func targetNotes(f figures, lo, ref int) []string {
	ns := func(name string, g int) string { return thousands(f.get(name, g, nsPerOp)) }
	return []string{
		"Ratios of the medians in the table above; a target is judged on the figure as shown (✓ met, ✗ missed, – not measured: a row that -only left out); a leased row's is missed whatever the figure when a row it reads refused a request or left more than 1% of its decisions to stand-ins (said in brackets).",
		fmt.Sprintf("Redis rows divide by, at g=%d: the floor (one GET per request, nothing decided) %s ns/op, ulule/limiter %s ns/op, go-redis/redis_rate %s ns/op and %s µs of redis CPU per decision; at g=%d, go-redis/redis_rate %s req/s.",
			lo, ns(subjects.FloorName, lo), ns(subjects.UluleRedisName, lo), ns(subjects.RedisRateName, lo),
			decimal(f.get(subjects.RedisRateName, lo, redisMicros), 1), ref, thousands(f.get(subjects.RedisRateName, ref, reqPerSec))),
		fmt.Sprintf("Memory rows: a middleware's overhead is its ns/op less the bare handler's (%s at g=%d, %s at g=%d); go-chi/httprate's is %s and %s ns.",
			ns(subjects.Bare.Name, ref), ref, ns(subjects.Bare.Name, lo), lo,
			thousands(f.get(subjects.HTTPRateMemoryName, ref, nsPerOp)-f.get(subjects.Bare.Name, ref, nsPerOp)),
			thousands(f.get(subjects.HTTPRateMemoryName, lo, nsPerOp)-f.get(subjects.Bare.Name, lo, nsPerOp))),
	}
}

// lowest returns the smallest of gs.
func lowest(gs []int) int {
	lo := gs[0]
	for _, g := range gs {
		lo = min(lo, g)
	}
	return lo
}

// writeTargets prints redlimit's targets from the compare section's
// records, when it measured any redlimit row.
func (s *session) writeTargets(recs []record) {
	f := figuresOf(recs)
	lo := lowest(s.cfg.gs)
	rt, mt, lt := redisTargets(f, lo, s.ref), memoryTargets(f, lo, s.ref), clientLeasedTargets(f, s.cfg.gs)
	if len(rt.rows)+len(mt.rows)+len(lt.rows) == 0 {
		return
	}
	fmt.Fprintf(s.out, "**Targets**: redlimit against the floor and its peers, Redis-backed then in memory, then the leased store against the exact one:\n\n")
	first := true
	for _, t := range []*table{rt, mt, lt} {
		if len(t.rows) == 0 {
			continue
		}
		if !first {
			fmt.Fprintln(s.out)
		}
		first = false
		t.write(s.out)
	}
	writeNotes(s.out, targetNotes(f, lo, s.ref))
}
