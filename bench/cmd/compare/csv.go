package main

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redlimit/redlimit/bench/internal/subjects"
)

// The -csv file holds the measurements behind the benchmark tables, one
// row per middleware, section and concurrency, for programs (docs/plots)
// rather than readers. Its format, version 1:
//
//   - Lines starting with "#" come first and describe the run, one
//     "# key: value" each (csvFormatKey first, then the machine and the
//     settings: see runMeta). Readers skip any other line starting with "#".
//   - Then RFC 4180 CSV: the header csvHeader, then the rows, in the order
//     the tables print them. Fields with commas are quoted.
//   - Every figure up to "rounds" is a median over the rounds, as in the
//     tables, and the counts after it are sums over the rounds; an empty
//     cell is a figure not measured (redis CPU of a memory middleware, CPU
//     where /proc could not be read). ns_per_op and req_per_s are wall-time
//     figures over all g goroutines: req_per_s = 1e9 / ns_per_op of each
//     round, medians taken separately.
//   - Sections written: "compare" (nearly all allowed, per-client traffic
//     over -clients client IPs, every g of -g), "tenants" (per-tenant
//     traffic: -tenants keys, each busy and below its limit, the lowest
//     and the middle g) and "denied" (nearly all denied, per-client, the
//     middle g only). A middleware's rows are told apart by section and g:
//     the same middleware is in several sections. The compare rows include
//     the floor ("floor: one GET", kind redis, peer false: one Redis GET
//     per request, nothing decided; not in denied) and redlimit's leased
//     rows (named with ", leased" and the ttl, kind redis; also in
//     tenants), and redis CPU and commands at every g. The targets tables
//     are not in the file: their figures are ratios of the rows. The sweep,
//     memory and real-HTTP tables are not in the file either.
//
// Columns are only ever added at the end, and a change that breaks readers
// changes the format number.
const (
	csvFormatKey     = "format"
	csvFormatVersion = "redlimit-bench-compare 1"
)

// csvHeader names the columns of the -csv file.
var csvHeader = []string{
	"section",                     // compare or denied
	"middleware",                  // the table row's label
	"kind",                        // none (the bare handler), memory or redis
	"peer",                        // true for another library, false for redlimit, the bare handler and the floor
	"g",                           // concurrent goroutines
	"ns_per_op",                   // wall time per request
	"req_per_s",                   // requests a second
	"allocs_per_op",               // heap allocations per request, whole process
	"bytes_per_op",                // heap bytes per request, whole process
	"app_cpu_us_per_op",           // this process's CPU time per request, µs
	"redis_cpu_us_per_decision",   // the redis-server's CPU time per request, µs
	"rounds",                      // the rounds the medians are taken over
	"unexpected",                  // timed requests answered with another status than the section's (204, 429), all rounds
	"stand_ins",                   // redlimit's decisions made by a stand-in rather than Redis, all requests served
	"cached_denials",              // redlimit's denials repeated from its local denial cache, all requests served
	"served",                      // all requests served, all rounds, testing's ramp-up runs included
	"redis_commands_per_decision", // commands Redis answered the middleware per request (a script call, or each command of a pipeline, is one)
}

// record is one row of the -csv file. A NaN figure was not measured.
type record struct {
	Section, Middleware, Kind string
	Peer                      bool
	G                         int
	NsPerOp, ReqPerSec        float64
	AllocsPerOp, BytesPerOp   float64
	AppMicros, RedisMicros    float64
	RedisCommands             float64
	Rounds                    int
	// Counts summed over the rounds, as in the tables' notes.
	Unexpected, StandIns, Cached, Served int64
}

// fields renders r as the cells of csvHeader.
func (r record) fields() []string {
	return []string{
		r.Section, r.Middleware, r.Kind, strconv.FormatBool(r.Peer), strconv.Itoa(r.G),
		csvNumber(r.NsPerOp, 1), csvNumber(r.ReqPerSec, 0),
		csvNumber(r.AllocsPerOp, 1), csvNumber(r.BytesPerOp, 0),
		csvNumber(r.AppMicros, 2), csvNumber(r.RedisMicros, 2),
		strconv.Itoa(r.Rounds),
		strconv.FormatInt(r.Unexpected, 10), strconv.FormatInt(r.StandIns, 10),
		strconv.FormatInt(r.Cached, 10), strconv.FormatInt(r.Served, 10),
		csvNumber(r.RedisCommands, 3),
	}
}

// csvNumber renders v with at most places decimals (trailing zeros
// dropped), or an empty cell for a figure not measured (NaN or negative).
func csvNumber(v float64, places int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return ""
	}
	s := strconv.FormatFloat(v, 'f', places, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// meta is one "# key: value" line of the -csv file.
type meta struct{ key, value string }

// writeCSV writes the metadata lines, the header and the rows to w.
func writeCSV(w io.Writer, metas []meta, recs []record) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# %s: %s\n", csvFormatKey, csvFormatVersion)
	for _, m := range metas {
		if strings.ContainsAny(m.key, ":\r\n") || strings.ContainsAny(m.value, "\r\n") {
			return fmt.Errorf("csv metadata %q: a key has no colon and neither has a line break", m.key)
		}
		fmt.Fprintf(bw, "# %s: %s\n", m.key, m.value)
	}
	cw := csv.NewWriter(bw)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for _, r := range recs {
		if err := cw.Write(r.fields()); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	return bw.Flush()
}

// writeCSVFile replaces path with the file, through a temporary file in the
// same folder, so that a reader never sees half of it and a failed write
// leaves the previous one.
func writeCSVFile(path string, metas []meta, recs []record) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".compare-*.csv")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	if err := writeCSV(f, metas, recs); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// checkCSVPath makes path's folder and checks that a file can be written
// there, so that a long run does not find out at its end.
func checkCSVPath(path string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("-csv %s: is a folder", path)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("-csv: %w", err)
	}
	f, err := os.CreateTemp(dir, ".compare-*.csv")
	if err != nil {
		return fmt.Errorf("-csv: %w", err)
	}
	return errors.Join(f.Close(), os.Remove(f.Name()))
}

// runMeta describes the run for the -csv file's "#" lines: the machine,
// the servers and the settings that the figures depend on.
func runMeta(cfg config, redisVersion string, hz int64, started time.Time) []meta {
	ms := []meta{
		{"started", started.UTC().Format(time.RFC3339)},
		{"go", strings.TrimPrefix(runtime.Version(), "go")},
		{"os_arch", runtime.GOOS + "/" + runtime.GOARCH},
		{"cpus", strconv.Itoa(runtime.NumCPU())},
		{"gomaxprocs", strconv.Itoa(runtime.GOMAXPROCS(0))},
	}
	if model := cpuModel(); model != "" {
		ms = append(ms, meta{"cpu", model})
	}
	return append(ms,
		meta{"redis", redisVersion},
		meta{"clk_tck", strconv.FormatInt(hz, 10)},
		meta{"limit", fmt.Sprintf("%d per %v", cfg.rate, cfg.period)},
		meta{"clients", strconv.Itoa(cfg.clients)},
		meta{"tenants", strconv.Itoa(cfg.tenants)},
		meta{"lease_ttl", subjects.LeaseTTL.String()},
		meta{"pool", strconv.Itoa(cfg.pool)},
		meta{"benchtime", cfg.benchtime.String()},
		meta{"count", strconv.Itoa(cfg.count)},
	)
}

// cpuModel returns the processor's model name from /proc/cpuinfo, or ""
// where there is none (not Linux, or not an architecture that names it).
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return ""
}
