package main

import (
	"bytes"
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readBack parses a -csv file as a reader following the documented format
// would: "# key: value" lines, then the header and rows.
func readBack(t *testing.T, data []byte) (map[string]string, []record) {
	t.Helper()
	metas := map[string]string{}
	var body bytes.Buffer
	for i, line := range strings.SplitAfter(string(data), "\n") {
		if strings.HasPrefix(line, "#") {
			if body.Len() > 0 {
				t.Fatalf("line %d: a # line after the header", i+1)
			}
			k, v, ok := strings.Cut(strings.TrimPrefix(line, "# "), ": ")
			if !ok {
				t.Fatalf("line %d: %q is not # key: value", i+1, line)
			}
			metas[k] = strings.TrimSuffix(v, "\n")
			continue
		}
		body.WriteString(line)
	}
	rows, err := csv.NewReader(&body).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 || !reflect.DeepEqual(rows[0], csvHeader) {
		t.Fatalf("header %q, want %q", rows[0], csvHeader)
	}
	num := func(s string) float64 {
		if s == "" {
			return math.NaN()
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("cell %q: %v", s, err)
		}
		return v
	}
	whole := func(s string) int {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("cell %q: %v", s, err)
		}
		return v
	}
	var recs []record
	for _, row := range rows[1:] {
		peer, err := strconv.ParseBool(row[3])
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, record{
			Section: row[0], Middleware: row[1], Kind: row[2], Peer: peer, G: whole(row[4]),
			NsPerOp: num(row[5]), ReqPerSec: num(row[6]), AllocsPerOp: num(row[7]), BytesPerOp: num(row[8]),
			AppMicros: num(row[9]), RedisMicros: num(row[10]), Rounds: whole(row[11]),
			Unexpected: int64(whole(row[12])), StandIns: int64(whole(row[13])),
			Cached: int64(whole(row[14])), Served: int64(whole(row[15])),
			RedisCommands: num(row[16]),
		})
	}
	return metas, recs
}

// sameFigure compares a written figure with the original at the precision
// written; NaN (not measured) only matches NaN.
func sameFigure(got, want float64, places int) bool {
	if math.IsNaN(want) || want < 0 {
		return math.IsNaN(got)
	}
	return math.Abs(got-want) <= 0.5*math.Pow(10, -float64(places))+1e-9
}

func TestCSVRoundTrip(t *testing.T) {
	recs := []record{
		{Section: "compare", Middleware: "bare handler (no limiter)", Kind: "none", G: 2,
			NsPerOp: 126.04, ReqPerSec: 7933968.3, AllocsPerOp: 4, BytesPerOp: 1024,
			AppMicros: 0.21, RedisMicros: math.NaN(), RedisCommands: math.NaN(), Rounds: 3},
		{Section: "compare", Middleware: "redlimit, redis, token_bucket", Kind: "redis", G: 256,
			NsPerOp: 22238.56, ReqPerSec: 44967.2, AllocsPerOp: 40.5, BytesPerOp: 3300,
			AppMicros: 24.847, RedisMicros: 18.7, RedisCommands: 0.0123, Rounds: 1,
			Unexpected: 3, StandIns: 242, Cached: 0, Served: 25399},
		{Section: "denied", Middleware: `a "quoted", odd name`, Kind: "memory", Peer: true, G: 50,
			NsPerOp: 881, ReqPerSec: 1134556, AllocsPerOp: 12, BytesPerOp: 0,
			AppMicros: -1, RedisMicros: -1, RedisCommands: 1, Rounds: 2,
			Cached: 1_000_000_000_000, Served: 1_000_000_000_001},
	}
	metas := []meta{{"go", "1.26.8"}, {"cpu", "Some CPU @ 2.00GHz"}, {"limit", "1000000 per 1m0s"}}
	var buf bytes.Buffer
	if err := writeCSV(&buf, metas, recs); err != nil {
		t.Fatal(err)
	}
	gotMeta, got := readBack(t, buf.Bytes())
	if !strings.HasPrefix(buf.String(), "# "+csvFormatKey+": "+csvFormatVersion+"\n") {
		t.Errorf("file does not start with its format line:\n%s", buf.String())
	}
	for _, m := range metas {
		if gotMeta[m.key] != m.value {
			t.Errorf("metadata %s = %q, want %q", m.key, gotMeta[m.key], m.value)
		}
	}
	if len(got) != len(recs) {
		t.Fatalf("%d rows read back, want %d", len(got), len(recs))
	}
	for i, w := range recs {
		g := got[i]
		if g.Section != w.Section || g.Middleware != w.Middleware || g.Kind != w.Kind || g.Peer != w.Peer || g.G != w.G || g.Rounds != w.Rounds ||
			g.Unexpected != w.Unexpected || g.StandIns != w.StandIns || g.Cached != w.Cached || g.Served != w.Served {
			t.Errorf("row %d: labels %+v, want %+v", i, g, w)
		}
		for _, f := range []struct {
			name      string
			got, want float64
			places    int
		}{
			{"ns_per_op", g.NsPerOp, w.NsPerOp, 1},
			{"req_per_s", g.ReqPerSec, w.ReqPerSec, 0},
			{"allocs_per_op", g.AllocsPerOp, w.AllocsPerOp, 1},
			{"bytes_per_op", g.BytesPerOp, w.BytesPerOp, 0},
			{"app_cpu_us_per_op", g.AppMicros, w.AppMicros, 2},
			{"redis_cpu_us_per_decision", g.RedisMicros, w.RedisMicros, 2},
			{"redis_commands_per_decision", g.RedisCommands, w.RedisCommands, 3},
		} {
			if !sameFigure(f.got, f.want, f.places) {
				t.Errorf("row %d %s: read back %v, wrote %v", i, f.name, f.got, f.want)
			}
		}
	}
}

func TestCSVNumber(t *testing.T) {
	for _, c := range []struct {
		v      float64
		places int
		want   string
	}{
		{126.04, 1, "126"},
		{126.06, 1, "126.1"},
		{7933968.3, 0, "7933968"},
		{40.5, 1, "40.5"},
		{0, 2, "0"},
		{1000, 0, "1000"},
		{math.NaN(), 2, ""},
		{-1, 2, ""},
		{math.Inf(1), 0, ""},
	} {
		if got := csvNumber(c.v, c.places); got != c.want {
			t.Errorf("csvNumber(%v, %d) = %q, want %q", c.v, c.places, got, c.want)
		}
	}
}

func TestCSVRejectsMetadataThatWouldBreakLines(t *testing.T) {
	for _, m := range []meta{{"cpu", "two\nlines"}, {"a: b", "x"}, {"k", "cr\r"}} {
		if err := writeCSV(&bytes.Buffer{}, []meta{m}, nil); err == nil {
			t.Errorf("metadata %q: %q written without error", m.key, m.value)
		}
	}
}

func TestWriteCSVFileReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "compare.csv")
	if err := os.WriteFile(path, []byte(strings.Repeat("old line\n", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	recs := []record{{Section: "compare", Middleware: "m", Kind: "memory", G: 50, NsPerOp: 1000, ReqPerSec: 1e6, Rounds: 1}}
	if err := writeCSVFile(path, nil, recs); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "old line") {
		t.Error("the previous file's content survived")
	}
	if _, got := readBack(t, data); len(got) != 1 || got[0].ReqPerSec != 1e6 {
		t.Errorf("read back %+v", got)
	}
	left, err := filepath.Glob(filepath.Join(dir, ".compare-*"))
	if err != nil || len(left) > 0 {
		t.Errorf("temporary files left: %v (%v)", left, err)
	}
}

func TestCheckCSVPath(t *testing.T) {
	dir := t.TempDir()
	if err := checkCSVPath(dir); err == nil {
		t.Error("a folder accepted as the -csv file")
	}
	nested := filepath.Join(dir, "a", "b", "compare.csv")
	if err := checkCSVPath(nested); err != nil {
		t.Errorf("%s: %v", nested, err)
	}
	if _, err := os.Stat(filepath.Dir(nested)); err != nil {
		t.Errorf("folder not made: %v", err)
	}
	if err := checkCSVPath(""); err != nil {
		t.Errorf("no -csv: %v", err)
	}
	if _, err := parseFlags([]string{"-csv", dir}); err == nil {
		t.Error("parseFlags accepted a folder as -csv")
	}
}

func TestRunMetaNamesTheRun(t *testing.T) {
	cfg := config{rate: 1000, period: time.Minute, clients: 10, tenants: 3, pool: 5, benchtime: 200 * time.Millisecond, count: 1}
	ms := runMeta(cfg, "7.0.15", 100, time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC))
	got := map[string]string{}
	for _, m := range ms {
		got[m.key] = m.value
	}
	for k, want := range map[string]string{
		"started": "2026-11-23T11:00:00Z", "redis": "7.0.15", "clk_tck": "100",
		"limit": "1000 per 1m0s", "benchtime": "200ms", "count": "1", "clients": "10", "pool": "5",
		"tenants": "3", "lease_ttl": "1s",
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	for _, k := range []string{"go", "os_arch", "cpus", "gomaxprocs"} {
		if got[k] == "" {
			t.Errorf("%s missing", k)
		}
	}
}
