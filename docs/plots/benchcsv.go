package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// benchFormat is the format line that the comparison's -csv file starts
// with (bench/cmd/compare/csv.go); another version is refused rather than
// misread.
const benchFormat = "redlimit-bench-compare 1"

// benchRun is a -csv file of the comparison: the "# key: value" lines that
// describe the run, and its rows.
type benchRun struct {
	meta map[string]string
	rows []benchRow
}

// benchRow is one middleware at one concurrency in one section: the
// columns that the pictures use.
type benchRow struct {
	section, middleware, kind string
	peer                      bool
	g                         int
	reqPerSec                 float64 // NaN when not measured
	standIns                  int64   // decisions made by a stand-in, not Redis
}

// benchColumns are the columns read, found by name so that columns added
// later do not matter.
var benchColumns = []string{"section", "middleware", "kind", "peer", "g", "req_per_s", "stand_ins"}

// readBench reads the comparison's -csv file at path. A missing file is an
// error wrapping fs.ErrNotExist; any other problem names the line.
func readBench(path string) (*benchRun, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	run := &benchRun{meta: map[string]string{}}
	// The "#" lines come before the header; csv skips them below (Comment)
	// and keeps counting them, so its line numbers are the file's.
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "#"), ":")
		if !ok {
			continue // a plain comment
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(strings.TrimSuffix(v, "\r"))
		run.meta[k] = v
	}
	switch f, ok := run.meta["format"]; {
	case !ok:
		return nil, fmt.Errorf("%s: not a comparison file: no \"# format: %s\" line before the header", path, benchFormat)
	case f != benchFormat:
		return nil, fmt.Errorf("%s: format %q, this program reads %q", path, f, benchFormat)
	}
	r := csv.NewReader(bytes.NewReader(data))
	r.Comment = '#'
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", path, err)
	}
	headerLine, _ := r.FieldPos(0)
	col := map[string]int{}
	for i, name := range header {
		col[name] = i
	}
	for _, name := range benchColumns {
		if _, ok := col[name]; !ok {
			return nil, fmt.Errorf("%s line %d: no %q column in the header", path, headerLine, name)
		}
	}
	for {
		rec, err := r.Read()
		if errors.Is(err, csv.ErrFieldCount) {
			line, _ := r.FieldPos(0)
			return nil, fmt.Errorf("%s line %d: %d fields, the header has %d", path, line, len(rec), len(header))
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%s: %w", path, err) // csv's ParseError names the line
		}
		line, _ := r.FieldPos(0)
		row, err := parseBenchRow(rec, col)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, line, err)
		}
		run.rows = append(run.rows, row)
	}
	return run, nil
}

// parseBenchRow reads the used cells of one record.
func parseBenchRow(rec []string, col map[string]int) (benchRow, error) {
	cell := func(name string) string { return strings.TrimSpace(rec[col[name]]) }
	row := benchRow{section: cell("section"), middleware: cell("middleware"), kind: cell("kind")}
	if row.section == "" || row.middleware == "" {
		return row, errors.New("empty section or middleware")
	}
	switch row.kind {
	case "none", "memory", "redis":
	default:
		return row, fmt.Errorf("kind %q is none of none, memory, redis", row.kind)
	}
	var err error
	if row.peer, err = strconv.ParseBool(cell("peer")); err != nil {
		return row, fmt.Errorf("peer %q is not true or false", cell("peer"))
	}
	if row.g, err = strconv.Atoi(cell("g")); err != nil || row.g < 1 {
		return row, fmt.Errorf("g %q is not a positive whole number", cell("g"))
	}
	row.reqPerSec = math.NaN()
	if s := cell("req_per_s"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return row, fmt.Errorf("req_per_s %q is not a number of requests a second", s)
		}
		row.reqPerSec = v
	}
	if row.standIns, err = strconv.ParseInt(cell("stand_ins"), 10, 64); err != nil || row.standIns < 0 {
		return row, fmt.Errorf("stand_ins %q is not a count", cell("stand_ins"))
	}
	return row, nil
}
