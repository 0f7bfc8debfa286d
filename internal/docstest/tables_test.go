package docstest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// separator matches a table's delimiter row: | --- | :---: | ---: |
var separator = regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+$`)

// TestTablesRender checks that every Markdown table renders as one: its
// rows start after a blank line, with a header and a delimiter row. Rows
// that follow a paragraph line, or a table split by a paragraph, would
// render as plain text.
func TestTablesRender(t *testing.T) {
	for _, name := range docFiles(t) {
		text, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		lines := proseLines(string(text), false)
		for i := 0; i < len(lines); i++ {
			if !strings.HasPrefix(strings.TrimSpace(lines[i]), "|") {
				continue
			}
			start := i
			for i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|") {
				i++
			}
			if start > 0 && strings.TrimSpace(lines[start-1]) != "" {
				t.Errorf("%s:%d: table rows follow a line of text; they render as text", name, start+1)
				continue
			}
			if i-start < 2 || !separator.MatchString(strings.TrimSpace(lines[start+1])) {
				t.Errorf("%s:%d: table without a delimiter row under its header", name, start+1)
			}
		}
	}
}
