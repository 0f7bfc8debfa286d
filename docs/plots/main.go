// Command plots draws how the five algorithms admit the same traffic, as
// PNGs for the README: `make plots` runs it. Each picture is one traffic
// pattern against a limit of 10 requests a second (burst 10 for the
// buckets), simulated on the memory store with a manual clock, so it is
// exact and the same on every run.
//
// From the comparison's measurements (docs/bench/compare.csv, written by
// `make bench-compare`), when that file exists, it also draws
// throughput.png: requests/s against concurrency for every middleware of
// the comparison, in memory and Redis-backed, with the machine and the run
// in its caption. Without the file it says so on standard error and draws
// the rest.
//
// It is a module of its own so that the plotting library never becomes a
// dependency of redlimit's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/memstore"
)

// limit is the limit every picture shows.
var limit = algorithms.PerSecond(10).WithBurst(10)

const (
	step     = 10 * time.Millisecond // the simulation's resolution
	duration = 6 * time.Second
)

// traffic says how many requests a client sends at t, given when it was
// last told to retry (zero if never): a pattern of the picture.
type traffic struct {
	name, title string
	send        func(t time.Duration, retryAt time.Duration) int
	denials     bool // plot the 429s rather than the admissions
}

var patterns = []traffic{
	{"burst", "One request at 0 s, then bursts of 30 at 0.95 s, 1.05 s and 3 s", func(t, _ time.Duration) int {
		switch t {
		case 0:
			return 1
		case 950 * time.Millisecond, 1050 * time.Millisecond, 3 * time.Second:
			return 30
		}
		return 0
	}, false},
	{"steady", "A steady 20 requests a second, twice the rate", func(t, _ time.Duration) int {
		if t%(50*time.Millisecond) == 0 {
			return 1
		}
		return 0
	}, false},
	{"retry", "429s received: 20 requests a second, pausing for Retry-After after each", func(t, retryAt time.Duration) int {
		if t < retryAt || t%(50*time.Millisecond) != 0 {
			return 0
		}
		return 1
	}, true},
}

var colors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
}

func main() {
	out := flag.String("out", ".", "folder to write the PNGs to")
	bench := flag.String("bench", "", "the comparison's -csv file to draw throughput.png from (default: bench/compare.csv in the -out folder)")
	flag.Parse()
	if err := drawAll(*out, *bench, os.Stdout, os.Stderr); err != nil {
		log.Fatal(err)
	}
}

// drawAll draws every picture into the folder out; throughput.png only
// when the comparison's file bench (default: out/bench/compare.csv)
// exists and has the comparison's nearly-all-allowed rows, saying on
// stderr when it does not; a malformed file is an error.
func drawAll(out, bench string, stdout, stderr io.Writer) error {
	for _, p := range patterns {
		path := filepath.Join(out, "admitted-"+p.name+".png")
		if err := draw1(p, path); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "wrote", path)
	}
	if bench == "" {
		bench = filepath.Join(out, "bench", "compare.csv")
	}
	run, err := readBench(bench)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stderr, "plots: no %s (make bench-compare writes it); throughput.png not drawn\n", bench)
		return nil
	}
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(run.rows, func(r benchRow) bool { return r.section == throughputSection }) {
		// A run of other sections only: a valid file with nothing to draw.
		fmt.Fprintf(stderr, "plots: no %q rows in %s (a run without that section); throughput.png not drawn\n", throughputSection, bench)
		return nil
	}
	path := filepath.Join(out, "throughput.png")
	if err := drawThroughput(run, path); err != nil {
		return fmt.Errorf("%s from %s: %w", path, bench, err)
	}
	fmt.Fprintln(stdout, "wrote", path, "from", bench)
	return nil
}

// simulate runs pattern p against alg and returns the cumulative admitted
// (or, for a pattern that plots denials, denied) requests at each step.
func simulate(p traffic, alg algorithms.Algorithm) (plotter.XYs, error) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := storetest.NewManualClock(start)
	store, err := memstore.New(memstore.WithClock(clock.Now))
	if err != nil {
		return nil, err
	}
	lim, err := algorithms.New(store, alg, limit)
	if err != nil {
		return nil, err
	}
	var xys plotter.XYs
	counted := 0
	var retryAt time.Duration
	for t := time.Duration(0); t <= duration; t += step {
		clock.Set(start.Add(t))
		for range p.send(t, retryAt) {
			res, err := lim.Allow(context.Background(), "client", 1)
			if err != nil {
				return nil, err
			}
			switch {
			case res.Allowed && !p.denials:
				counted++
			case !res.Allowed:
				retryAt = t + res.RetryAfter
				if p.denials {
					counted++
				}
			}
		}
		xys = append(xys, plotter.XY{X: t.Seconds(), Y: float64(counted)})
	}
	return xys, nil
}

// draw1 plots every algorithm's admissions under pattern p into path.
func draw1(p traffic, path string) error {
	pl := plot.New()
	pl.Title.Text = p.title + " (limit 10/s, burst 10)"
	pl.X.Label.Text = "seconds"
	pl.Y.Label.Text = "requests admitted, cumulative"
	if p.denials {
		pl.Y.Label.Text = "429s received, cumulative"
	}
	pl.Legend.Top = true
	pl.Legend.Left = true
	pl.Add(plotter.NewGrid())
	for i, alg := range algorithms.All() {
		xys, err := simulate(p, alg)
		if err != nil {
			return fmt.Errorf("%s: %w", alg, err)
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		line.Color = colors[i%len(colors)]
		line.Width = vg.Points(1.5)
		line.Dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, nil, {vg.Points(2), vg.Points(2)}, nil}[i%5]
		pl.Add(line)
		pl.Legend.Add(fmt.Sprintf("%s (%.0f)", alg, xys[len(xys)-1].Y), line)
	}
	if !p.denials {
		// The sustained rate, for reference.
		ref := plotter.NewFunction(func(x float64) float64 { return 10 * x })
		ref.Color = color.Gray{Y: 0x99}
		ref.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
		pl.Add(ref)
		pl.Legend.Add("10/s", ref)
	}
	pl.Legend.Padding = vg.Points(2)
	pl.Legend.ThumbnailWidth = vg.Points(24)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return pl.Save(8*vg.Inch, 4*vg.Inch, path)
}
