package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// logOffsets returns the current size of each instance's log, so that
// logSince can read what came after.
func (c *cluster) logOffsets() []int64 {
	offs := make([]int64, len(c.instances))
	for i, p := range c.instances {
		if fi, err := os.Stat(p.log); err == nil {
			offs[i] = fi.Size()
		}
	}
	return offs
}

// Log lines come in two formats: the example's own logger is slog's text
// handler (time=... level=WARN msg="..." k=v); the Redis store's default
// logger is slog.Default, which writes through package log
// (2006/01/02 15:04:05 WARN message k=v).
var (
	slogText   = regexp.MustCompile(`^time=\S+ level=(\w+) msg=("(?:[^"\\]|\\.)*"|\S+) ?(.*)$`)
	slogViaLog = regexp.MustCompile(`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d (DEBUG|INFO|WARN|ERROR) (.*?)(?: (\w+=.*))?$`)
)

// parseLogLine returns a log line's level, message and attributes; level
// is "" for a line in neither format (a panic's, say).
func parseLogLine(line string) (level, msg, attrs string) {
	if m := slogText.FindStringSubmatch(line); m != nil {
		msg = m[2]
		if s, err := strconv.Unquote(msg); err == nil {
			msg = s
		}
		return m[1], msg, m[3]
	}
	if m := slogViaLog.FindStringSubmatch(line); m != nil {
		return m[1], m[2], m[3]
	}
	return "", line, ""
}

// logSince summarizes the instances' log lines written after offs (from
// logOffsets), all instances together, grouped by level and message, each
// with its count and the attributes of its first line, e.g.
// "WARN redlimit: Redis breaker open: 3 (first: from=closed ...)". The
// start and shutdown lines are left out.
func (c *cluster) logSince(offs []int64) []string {
	type group struct {
		n     int
		first string
	}
	groups := map[string]*group{}
	for i, p := range c.instances {
		f, err := os.Open(p.log)
		if err != nil {
			groups["cannot read "+p.name+"'s log: "+err.Error()] = &group{n: 1}
			continue
		}
		if _, err := f.Seek(offs[i], io.SeekStart); err != nil {
			f.Close()
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "redlimit example listening") || strings.TrimSpace(line) == "shutting down" || strings.TrimSpace(line) == "" {
				continue
			}
			level, msg, attrs := parseLogLine(line)
			k := msg
			if level != "" {
				k = level + " " + msg
			} else {
				k = "(unparsed) " + k
			}
			g := groups[k]
			if g == nil {
				g = &group{first: attrs}
				groups[k] = g
			}
			g.n++
		}
		f.Close()
	}
	var out []string
	for k, g := range groups {
		line := fmt.Sprintf("%s: %d", k, g.n)
		if g.first != "" {
			line += " (first: " + g.first + ")"
		}
		out = append(out, line)
	}
	slices.Sort(out)
	return out
}
