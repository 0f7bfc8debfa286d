package docstest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// link matches a Markdown link or image target: [text](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// inlineCode matches a code span, whose text is not Markdown.
var inlineCode = regexp.MustCompile("`[^`]*`")

// proseLines returns a Markdown text's lines, those of fenced code blocks
// (fences included) left empty, and with code spans blanked when blankCode
// is set.
func proseLines(text string, blankCode bool) []string {
	var out []string
	inFence := ""
	for _, line := range strings.Split(text, "\n") {
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case inFence == "":
				inFence = m[2]
				out = append(out, "")
				continue
			case strings.TrimSpace(line) == inFence:
				inFence = ""
				out = append(out, "")
				continue
			}
		}
		if inFence == "" && blankCode {
			line = inlineCode.ReplaceAllString(line, "``")
		}
		if inFence == "" {
			out = append(out, line)
		} else {
			out = append(out, "")
		}
	}
	return out
}

// anchors returns the fragment identifiers GitHub gives a Markdown file's
// headings: lower case, punctuation other than '-' and '_' dropped, spaces
// turned into '-', and "-1", "-2", ... after a repeated one.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(text, false) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			id += "-" + strconv.Itoa(n)
		}
		seen[b.String()]++
		out[id] = true
	}
	return out
}

// TestLinksLead checks that every relative link of README.md and docs/*.md
// names a file that exists and, for a Markdown file, a heading it has.
func TestLinksLead(t *testing.T) {
	texts := map[string]string{}
	for _, name := range docFiles(t) {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		texts[name] = string(b)
	}
	for name, text := range texts {
		for i, line := range proseLines(text, true) {
			n := i + 1
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				file := name
				if path != "" {
					file = filepath.ToSlash(filepath.Join(filepath.Dir(name), path))
					if _, err := os.Stat(filepath.Join(root, file)); err != nil {
						t.Errorf("%s:%d: link to %s: no such file", name, n, target)
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(file, ".md") {
					continue
				}
				linked, ok := texts[file]
				if !ok {
					b, err := os.ReadFile(filepath.Join(root, file))
					if err != nil {
						t.Errorf("%s:%d: link to %s: %v", name, n, target, err)
						continue
					}
					linked = string(b)
				}
				if !anchors(linked)[anchor] {
					t.Errorf("%s:%d: link to %s: %s has no heading #%s", name, n, target, file, anchor)
				}
			}
		}
	}
}
