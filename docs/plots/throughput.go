package main

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// throughputSection is the comparison's section the picture shows: nearly
// every request allowed, measured at every concurrency.
const throughputSection = "compare"

// Sizes of the throughput picture: two panels, each a plot with its legend
// on its right, above a caption.
const (
	tpWidth   = 10 * vg.Inch
	tpPanel   = 3.6 * vg.Inch
	tpLegend  = 3.3 * vg.Inch
	tpCaption = 1.0 * vg.Inch
)

// peerStyles tell the other libraries apart from redlimit's rows: dark,
// solid, each with its own marker.
var peerStyles = []struct {
	color color.Color
	glyph draw.GlyphDrawer
}{
	{color.Gray{Y: 0x00}, draw.CircleGlyph{}},
	{color.Gray{Y: 0x60}, draw.TriangleGlyph{}},
	{color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, draw.SquareGlyph{}},
}

// drawThroughput draws requests/s against concurrency for every
// middleware of the comparison's "nearly all allowed" section, in-memory
// ones above Redis-backed ones, into path.
func drawThroughput(run *benchRun, path string) error {
	var rows []benchRow
	for _, r := range run.rows {
		if r.section == throughputSection {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("no %q rows (the comparison's nearly-all-allowed section): run it with -sections compare", throughputSection)
	}
	// A panel for each kind the run measured (-only may have left one out).
	var panels []struct{ kind, title string }
	for _, p := range []struct{ kind, title string }{
		{"memory", "In memory: requests/s against concurrent goroutines, nearly all allowed"},
		{"redis", "Redis-backed: requests/s against concurrent goroutines, nearly all allowed"},
	} {
		if slices.ContainsFunc(rows, func(r benchRow) bool { return r.kind == p.kind && !math.IsNaN(r.reqPerSec) }) {
			panels = append(panels, p)
		}
	}
	if len(panels) == 0 {
		return errors.New("no memory or Redis-backed middleware with a req/s figure")
	}
	c, err := draw.NewFormattedCanvas(tpWidth, vg.Length(len(panels))*tpPanel+tpCaption, "png")
	if err != nil {
		return err
	}
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	for i, p := range panels {
		top := tpCaption + vg.Length(len(panels)-i)*tpPanel
		area := draw.Crop(dc, 0, 0, top-tpPanel, top-dc.Max.Y-vg.Points(6))
		if err := drawPanel(area, p.kind, p.title, rows); err != nil {
			return fmt.Errorf("%s panel: %w", p.kind, err)
		}
	}
	captionStyle := text.Style{
		Color:   color.Black,
		Font:    font.From(plot.DefaultFont, 9),
		XAlign:  draw.XLeft,
		YAlign:  draw.YTop,
		Handler: plot.DefaultTextHandler,
	}
	dc.FillText(captionStyle, vg.Point{X: vg.Points(8), Y: tpCaption - vg.Points(4)}, caption(run, rows))

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// drawPanel plots the rows of one kind into area: the plot on the left,
// its legend on the right.
func drawPanel(area draw.Canvas, kind, title string, rows []benchRow) error {
	names, byName := rowsOfKind(kind, rows)
	if len(names) == 0 {
		return fmt.Errorf("no %s rows with req/s", kind)
	}
	pl, legend := newPanel(title)
	var gs []int
	top := 0.0
	var st lineStyler
	for _, name := range names {
		rs := byName[name]
		slices.SortFunc(rs, func(a, b benchRow) int { return a.g - b.g })
		line, points, err := seriesOf(rs)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		st.style(line, points, name, rs[0].peer)
		pl.Add(line, points)
		legend.Add(legendLabel(name, rs), line, points)
		for _, r := range rs {
			top = max(top, r.reqPerSec)
			if !slices.Contains(gs, r.g) {
				gs = append(gs, r.g)
			}
		}
	}
	setAxes(pl, gs, top)
	pl.Draw(draw.Crop(area, 0, -tpLegend, 0, 0))
	legend.Draw(draw.Crop(area, tpWidth-tpLegend+vg.Points(6), 0, 0, -vg.Points(24)))
	return nil
}

// rowsOfKind groups the rows of kind with a req/s figure by middleware,
// the names in the order they first appear.
func rowsOfKind(kind string, rows []benchRow) ([]string, map[string][]benchRow) {
	var names []string
	byName := map[string][]benchRow{}
	for _, r := range rows {
		if r.kind != kind || math.IsNaN(r.reqPerSec) {
			continue
		}
		if _, ok := byName[r.middleware]; !ok {
			names = append(names, r.middleware)
		}
		byName[r.middleware] = append(byName[r.middleware], r)
	}
	return names, byName
}

// newPanel returns an empty panel's plot and its legend.
func newPanel(title string) (*plot.Plot, *plot.Legend) {
	pl := plot.New()
	pl.Title.Text = title
	pl.Title.TextStyle.Font.Size = 11
	pl.X.Label.Text = "goroutines (log scale)"
	pl.Y.Label.Text = "requests/s"
	pl.X.Scale = plot.LogScale{}
	pl.Y.Tick.Marker = siTicks{}
	pl.Add(plotter.NewGrid())
	// The legend is drawn beside the plot, not in it, where it would hide
	// lines.
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = 10
	legend.ThumbnailWidth = vg.Points(28)
	return pl, &legend
}

// seriesOf returns the line and points of one middleware's rows, sorted
// by g.
func seriesOf(rs []benchRow) (*plotter.Line, *plotter.Scatter, error) {
	xys := make(plotter.XYs, len(rs))
	for i, r := range rs {
		xys[i] = plotter.XY{X: float64(r.g), Y: r.reqPerSec}
	}
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return nil, nil, err
	}
	line.Width = vg.Points(1.5)
	points.Radius = vg.Points(2.5)
	return line, points, nil
}

// referenceColor draws the rows that are neither a peer's nor redlimit's
// (the comparison's floor, one Redis GET per request), light and dotted.
var referenceColor = color.Gray{Y: 0xa0}

// lineStyler gives the peers' lines peerStyles in turn, redlimit's
// colours and dashes in turn (its leased rows with square points), and any
// other row the reference style.
type lineStyler struct{ peers, ours int }

func (s *lineStyler) style(line *plotter.Line, points *plotter.Scatter, name string, peer bool) {
	switch {
	case peer:
		st := peerStyles[s.peers%len(peerStyles)]
		s.peers++
		line.Color, points.Color, points.Shape = st.color, st.color, st.glyph
		return
	case !strings.HasPrefix(name, "redlimit"):
		line.Color, points.Color, points.Shape = referenceColor, referenceColor, draw.RingGlyph{}
		line.Dashes = []vg.Length{vg.Points(1.5), vg.Points(2.5)}
		return
	}
	line.Color = colors[s.ours%len(colors)]
	line.Dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, nil, {vg.Points(2), vg.Points(2)}, nil,
		{vg.Points(8), vg.Points(2), vg.Points(2), vg.Points(2)}}[s.ours%6]
	points.Color = line.Color
	if strings.Contains(name, leasedMark) {
		// Square points, so that a leased row is told from the row whose
		// colour and dashes it shares once they have gone round.
		points.Shape = draw.BoxGlyph{}
	}
	s.ours++
}

// leasedMark is in the names of redlimit's rows on a leased Redis store.
const leasedMark = ", leased"

// legendLabel is a middleware's short name, starred when a stand-in made
// some of its decisions.
func legendLabel(name string, rs []benchRow) string {
	var standIns int64
	for _, r := range rs {
		standIns += r.standIns
	}
	if standIns > 0 {
		return shortName(name) + " *"
	}
	return shortName(name)
}

// setAxes ticks the x axis at each measured g and spans both axes over
// the figures.
func setAxes(pl *plot.Plot, gs []int, top float64) {
	slices.Sort(gs)
	ticks := make([]plot.Tick, len(gs))
	for i, g := range gs {
		ticks[i] = plot.Tick{Value: float64(g), Label: strconv.Itoa(g)}
	}
	pl.X.Tick.Marker = plot.ConstantTicks(ticks)
	pl.X.Min, pl.X.Max = float64(gs[0])/1.3, float64(gs[len(gs)-1])*1.3
	pl.Y.Min, pl.Y.Max = 0, top*1.08
}

// shortName drops the store from redlimit's row names, which the panel
// already says: "redlimit, memory, token_bucket" becomes "redlimit,
// token_bucket".
func shortName(name string) string {
	for _, store := range []string{", memory, ", ", redis, "} {
		if rest, ok := strings.CutPrefix(name, "redlimit"+store); ok {
			return "redlimit, " + rest
		}
	}
	return name
}

// caption says where the figures come from: the machine, the servers and
// the settings of the one run, and the bare handler's figures for scale.
func caption(run *benchRun, rows []benchRow) string {
	m := func(k string) string {
		if v := run.meta[k]; v != "" {
			return v
		}
		return "?"
	}
	machine := fmt.Sprintf("%s CPUs", m("cpus"))
	if cpu := run.meta["cpu"]; cpu != "" {
		machine += " (" + cpu + ")"
	}
	lines := []string{
		fmt.Sprintf("All figures from one run of the comparison (bench/cmd/compare, as make bench-compare runs it), started %s: compare them only with each other.", m("started")),
		fmt.Sprintf("Machine: %s, %s, GOMAXPROCS %s, Go %s, redis-server %s on loopback.", machine, m("os_arch"), m("gomaxprocs"), m("go"), m("redis")),
		fmt.Sprintf("Limit %s, %s client IPs, go-redis pool %s, benchtime %s, count %s (medians of the rounds).",
			m("limit"), m("clients"), m("pool"), m("benchtime"), m("count")),
	}
	var bare []string
	for _, r := range rows {
		if r.kind == "none" && !math.IsNaN(r.reqPerSec) {
			bare = append(bare, fmt.Sprintf("%s at g=%d", siLabel(r.reqPerSec), r.g))
		}
	}
	if len(bare) > 0 {
		lines = append(lines, "The bare handler, with no limiter, served "+strings.Join(bare, ", ")+" requests/s.")
	}
	for _, r := range rows {
		if r.standIns > 0 {
			lines = append(lines, "* some of this middleware's decisions were made by a stand-in (local twin, fail-open or fail-closed), not by Redis: see the report's notes.")
			break
		}
	}
	return strings.Join(lines, "\n")
}

// siTicks are the default ticks labelled 200k, 1.5M.
type siTicks struct{}

// Ticks returns plot.DefaultTicks relabelled.
func (siTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = siLabel(ticks[i].Value)
		}
	}
	return ticks
}

// siLabel renders 1500000 as 1.5M and 20000 as 20k.
func siLabel(v float64) string {
	f := func(x float64) string { return strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64) }
	switch a := math.Abs(v); {
	case a >= 1e6:
		return f(v/1e6) + "M"
	case a >= 1e3:
		return f(v/1e3) + "k"
	}
	return f(v)
}
