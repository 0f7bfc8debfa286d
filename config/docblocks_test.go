package config

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// yamlFence opens a fenced YAML block of Markdown, and captures its indent.
var yamlFence = regexp.MustCompile("^( *)```+\\s*yaml\\s*$")

// yamlBlock is a fenced YAML block of the documentation.
type yamlBlock struct {
	file string // relative to the repository's root
	line int    // of its first line
	code string
}

// docYAMLBlocks returns the YAML blocks of the repository's README.md and
// docs/*.md.
func docYAMLBlocks(t *testing.T) []yamlBlock {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "docs", "*.md")) // the pattern is well-formed
	files = append([]string{filepath.Join("..", "README.md")}, files...)
	var out []yamlBlock
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.ToSlash(strings.TrimPrefix(f, ".."+string(filepath.Separator)))
		var cur *yamlBlock
		var indent string
		sc := bufio.NewScanner(strings.NewReader(string(text)))
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			switch {
			case cur == nil:
				if m := yamlFence.FindStringSubmatch(line); m != nil {
					cur, indent = &yamlBlock{file: name, line: n + 1}, m[1]
				}
			case strings.HasPrefix(strings.TrimSpace(line), "```"):
				out = append(out, *cur)
				cur = nil
			default:
				cur.code += strings.TrimPrefix(line, indent) + "\n"
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestDocConfigBlocksParse parses every YAML block of the documentation
// that holds policies, as Load would a file: a sample a reader copies must
// load.
func TestDocConfigBlocksParse(t *testing.T) {
	checked := 0
	for _, b := range docYAMLBlocks(t) {
		if !strings.Contains(b.code, "policies:") {
			continue
		}
		checked++
		// Blank lines ahead of the block make the parser's line numbers
		// those of the Markdown file.
		src := strings.Repeat("\n", b.line-1) + b.code
		if _, err := Parse([]byte(src), b.file); err != nil {
			t.Errorf("%v", err)
		}
	}
	if checked == 0 {
		t.Error("no configuration sample found in the documentation")
	}
	t.Logf("%d configuration samples parsed", checked)
}
