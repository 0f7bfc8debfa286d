package main

import (
	"bytes"
	"errors"
	"image/png"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goodBench is a comparison file as bench/cmd/compare writes it, with a
// column this reader does not know (added later) and cells not measured.
const goodBench = `# format: redlimit-bench-compare 1
# started: 2026-11-23T11:02:24Z
# go: 1.26.8
# cpus: 2
# cpu: Some CPU
# a plain comment
section,middleware,kind,peer,g,ns_per_op,req_per_s,allocs_per_op,bytes_per_op,app_cpu_us_per_op,redis_cpu_us_per_decision,rounds,unexpected,stand_ins,cached_denials,served,redis_commands_per_decision,later
compare,bare handler (no limiter),none,false,2,126,7936508,4,208,0.2,,3,0,0,0,100,,x
compare,bare handler (no limiter),none,false,50,131,7633588,4,208,0.2,,3,0,0,0,100,,x
compare,"x/time/rate, keyed sync.Map",memory,true,2,226,4424779,4,208,0.5,,3,0,0,0,100,,x
compare,"x/time/rate, keyed sync.Map",memory,true,50,246,4065041,4,208,0.5,,3,0,0,0,100,,x
compare,"redlimit, memory, token_bucket",memory,false,50,1279,781861,10,1248,2.5,,3,0,0,0,100,,x
compare,"redlimit, memory, token_bucket",memory,false,2,1284,778816,10,1248,2.5,,3,0,0,0,100,,x
compare,go-redis/redis_rate v10,redis,true,2,49485,20208,37,1792,17.6,15.6,3,0,0,0,100,0.125,x
compare,go-redis/redis_rate v10,redis,true,50,20921,47798,37,1792,17.6,15.6,3,0,0,0,100,0.125,x
compare,"redlimit, redis, leaky_bucket",redis,false,2,66723,,40,2400,23.6,16.8,3,0,0,0,100,0.125,x
compare,"redlimit, redis, leaky_bucket",redis,false,50,23356,42815,40,2400,23.6,16.8,3,0,242,0,100,0.125,x
denied,"redlimit, redis, leaky_bucket",redis,false,50,3000,333333,14,900,4.6,,3,0,0,99,100,0.125,x
tenants,"redlimit, redis, leaky_bucket, leased 1s",redis,false,50,3000,333333,8,900,4.6,0.1,3,0,0,0,100,0.125,x
`

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "compare.csv")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadBenchGoodFile(t *testing.T) {
	run, err := readBench(writeTemp(t, goodBench))
	if err != nil {
		t.Fatal(err)
	}
	if run.meta["started"] != "2026-11-23T11:02:24Z" || run.meta["cpu"] != "Some CPU" || run.meta["go"] != "1.26.8" {
		t.Errorf("meta %v", run.meta)
	}
	if len(run.rows) != 12 {
		t.Fatalf("%d rows, want 12", len(run.rows))
	}
	x := run.rows[2]
	if x.section != "compare" || x.middleware != "x/time/rate, keyed sync.Map" || x.kind != "memory" || !x.peer || x.g != 2 || x.reqPerSec != 4424779 {
		t.Errorf("row 3 read as %+v", x)
	}
	if r := run.rows[8]; !math.IsNaN(r.reqPerSec) {
		t.Errorf("an empty req_per_s read as %v, want NaN (not measured)", r.reqPerSec)
	}
	if r := run.rows[9]; r.standIns != 242 || r.peer {
		t.Errorf("row 10 read as %+v", r)
	}
	if r := run.rows[10]; r.section != "denied" {
		t.Errorf("row 11's section %q", r.section)
	}
	if r := run.rows[11]; r.section != "tenants" || r.middleware != "redlimit, redis, leaky_bucket, leased 1s" {
		t.Errorf("last row read as %+v", r)
	}
}

func TestReadBenchMissingFile(t *testing.T) {
	_, err := readBench(filepath.Join(t.TempDir(), "none.csv"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}

func TestReadBenchMalformed(t *testing.T) {
	header := "section,middleware,kind,peer,g,req_per_s,stand_ins\n"
	good := "compare,m,memory,false,2,1000,0\n"
	for _, c := range []struct{ name, content, want string }{
		{"no format line", header + good, "not a comparison file"},
		{"another format", "# format: redlimit-bench-compare 2\n" + header + good, `format "redlimit-bench-compare 2"`},
		{"missing column", "# format: redlimit-bench-compare 1\nsection,middleware,kind,peer,g,stand_ins\n", `line 2: no "req_per_s" column`},
		{"bad g", "# format: redlimit-bench-compare 1\n" + header + good + "compare,m,memory,false,two,1000,0\n", `line 4: g "two"`},
		{"zero g", "# format: redlimit-bench-compare 1\n" + header + "compare,m,memory,false,0,1000,0\n", `line 3: g "0"`},
		{"bad req/s", "# format: redlimit-bench-compare 1\n" + header + good + good + "compare,m,memory,false,50,fast,0\n", `line 5: req_per_s "fast"`},
		{"negative req/s", "# format: redlimit-bench-compare 1\n" + header + "compare,m,memory,false,50,-3,0\n", `line 3: req_per_s "-3"`},
		{"infinite req/s", "# format: redlimit-bench-compare 1\n" + header + "compare,m,memory,false,50,+Inf,0\n", `line 3: req_per_s "+Inf"`},
		{"bad kind", "# format: redlimit-bench-compare 1\n" + header + "compare,m,disk,false,50,1,0\n", `line 3: kind "disk"`},
		{"bad peer", "# format: redlimit-bench-compare 1\n" + header + "compare,m,redis,maybe,50,1,0\n", `line 3: peer "maybe"`},
		{"bad stand-ins", "# format: redlimit-bench-compare 1\n" + header + "compare,m,redis,false,50,1,-1\n", `line 3: stand_ins "-1"`},
		{"empty middleware", "# format: redlimit-bench-compare 1\n" + header + "compare,,redis,false,50,1,0\n", "line 3: empty section or middleware"},
		{"short line", "# format: redlimit-bench-compare 1\n" + header + good + "compare,m,memory\n", "line 4: 3 fields, the header has 7"},
		{"bad quote", "# format: redlimit-bench-compare 1\n" + header + good + "compare,\"m,memory,false,2,1,0\n", "line 4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeTemp(t, c.content)
			_, err := readBench(path)
			if err == nil {
				t.Fatal("read without error")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file and %q", err, c.want)
			}
		})
	}
}

func TestDrawThroughput(t *testing.T) {
	run, err := readBench(writeTemp(t, goodBench))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var pictures [][]byte
	for _, name := range []string{"a.png", "b.png"} {
		path := filepath.Join(dir, name)
		if err := drawThroughput(run, path); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		pictures = append(pictures, b)
	}
	img, err := png.Decode(bytes.NewReader(pictures[0]))
	if err != nil {
		t.Fatal(err)
	}
	if w, h := img.Bounds().Dx(), img.Bounds().Dy(); w < 600 || h < 600 {
		t.Errorf("picture %dx%d, want two panels' worth", w, h)
	}
	if !bytes.Equal(pictures[0], pictures[1]) {
		t.Error("the same file drew two different pictures")
	}

	// A run of one kind at one concurrency (-only, -g): one panel, single
	// points.
	var redis50 []benchRow
	for _, r := range run.rows {
		if r.section == "compare" && r.kind == "redis" && r.g == 50 {
			redis50 = append(redis50, r)
		}
	}
	one := &benchRun{meta: run.meta, rows: redis50}
	path := filepath.Join(dir, "one.png")
	if err := drawThroughput(one, path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	small, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if small.Bounds().Dx() != img.Bounds().Dx() || small.Bounds().Dy() >= img.Bounds().Dy()*3/4 {
		t.Errorf("one panel drawn %v, two %v", small.Bounds(), img.Bounds())
	}

	run.rows = run.rows[len(run.rows)-2:] // only the denied and the per-tenant rows
	if err := drawThroughput(run, filepath.Join(dir, "c.png")); err == nil || !strings.Contains(err.Error(), `no "compare" rows`) {
		t.Errorf("a file without the compare section: err = %v", err)
	}
}

func TestCaptionNamesTheRun(t *testing.T) {
	run, err := readBench(writeTemp(t, goodBench))
	if err != nil {
		t.Fatal(err)
	}
	c := caption(run, run.rows)
	for _, want := range []string{"one run", "2026-11-23T11:02:24Z", "2 CPUs (Some CPU)", "Go 1.26.8", "7.9M at g=2, 7.6M at g=50", "stand-in"} {
		if !strings.Contains(c, want) {
			t.Errorf("caption lacks %q:\n%s", want, c)
		}
	}
}

func TestDrawAllWithoutBenchFile(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := drawAll(out, "", &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), filepath.Join(out, "bench", "compare.csv")) {
		t.Errorf("stderr %q does not name the missing file", stderr.String())
	}
	for _, p := range patterns {
		if _, err := os.Stat(filepath.Join(out, "admitted-"+p.name+".png")); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "throughput.png")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("throughput.png drawn without a file: %v", err)
	}

	bench := writeTemp(t, "not,a,comparison\n")
	if err := drawAll(out, bench, &stdout, &stderr); err == nil {
		t.Error("a malformed comparison file drew without error")
	}

	// A run of the denied section only: nothing to draw, said, no error.
	var denied []string
	for _, line := range strings.Split(goodBench, "\n") {
		if !strings.HasPrefix(line, "compare,") {
			denied = append(denied, line)
		}
	}
	stderr.Reset()
	if err := drawAll(out, writeTemp(t, strings.Join(denied, "\n")), &stdout, &stderr); err != nil {
		t.Errorf("a file without compare rows: %v", err)
	}
	if !strings.Contains(stderr.String(), `no "compare" rows`) {
		t.Errorf("stderr %q does not say why throughput.png was not drawn", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(out, "throughput.png")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("throughput.png drawn without compare rows: %v", err)
	}
}

func TestShortNameAndSILabel(t *testing.T) {
	for in, want := range map[string]string{
		"redlimit, memory, token_bucket":   "redlimit, token_bucket",
		"redlimit, redis, leaky_bucket":    "redlimit, leaky_bucket",
		"ulule/limiter, memory store":      "ulule/limiter, memory store",
		"go-chi/httprate + httprate-redis": "go-chi/httprate + httprate-redis",
	} {
		if got := shortName(in); got != want {
			t.Errorf("shortName(%q) = %q, want %q", in, got, want)
		}
	}
	for v, want := range map[float64]string{0: "0", 950: "950", 20000: "20k", 42815: "42.8k", 1.5e6: "1.5M", 7633588: "7.6M"} {
		if got := siLabel(v); got != want {
			t.Errorf("siLabel(%v) = %q, want %q", v, got, want)
		}
	}
}
