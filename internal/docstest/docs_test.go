package docstest

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the module's root, where README.md and docs/ are.
const root = "../.."

// fragmentImports are the packages a fragment may use without importing
// them, under the names the documentation uses.
var fragmentImports = []string{
	"context",
	"errors",
	"fmt",
	"log",
	"log/slog",
	"net/http",
	"net/netip",
	"os",
	"time",
	"github.com/go-chi/chi/v5",
	"github.com/go-chi/httprate",
	"github.com/golang-jwt/jwt/v5",
	"github.com/prometheus/client_golang/prometheus",
	"github.com/prometheus/client_golang/prometheus/promhttp",
	"github.com/redis/go-redis/v9",
	"github.com/redlimit/redlimit/algorithms",
	"github.com/redlimit/redlimit/config",
	"github.com/redlimit/redlimit/httpratecounter",
	"github.com/redlimit/redlimit/keyfunc",
	"github.com/redlimit/redlimit/keyfunc/jwtkey",
	"github.com/redlimit/redlimit/memstore",
	"github.com/redlimit/redlimit/metrics",
	"github.com/redlimit/redlimit/middleware",
	"github.com/redlimit/redlimit/middleware/chiroute",
	"github.com/redlimit/redlimit/operator",
	"github.com/redlimit/redlimit/otelmetrics",
	"github.com/redlimit/redlimit/redisstore",
}

// block is one fenced code block of a Markdown file.
type block struct {
	file string // relative to root, as error positions name it
	line int    // of the block's first line of code
	info string // the fence's info string: "go", "yaml", ...
	code string
}

// docFiles are the Markdown files the test reads, relative to root.
func docFiles(t *testing.T) []string {
	t.Helper()
	return markdownFiles()
}

// markdownFiles are README.md and docs/*.md, relative to root.
func markdownFiles() []string {
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md")) // the pattern is well-formed
	out := []string{"README.md"}
	for _, f := range files {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			continue // never: the glob is under root
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// fileImports returns the import paths of a complete Go file, none if it
// does not parse (its errors are reported where it is checked).
func fileImports(code string) []string {
	f, err := parser.ParseFile(token.NewFileSet(), "", code, parser.ImportsOnly)
	if err != nil {
		return nil
	}
	var out []string
	for _, imp := range f.Imports {
		out = append(out, strings.Trim(imp.Path.Value, `"`))
	}
	return out
}

var fence = regexp.MustCompile("^( *)(```+)\\s*([^`\\s]*)")

// codeBlocks returns the fenced blocks of a Markdown text, with the fence's
// indentation (a block inside a list item) taken off each line.
func codeBlocks(name, text string) ([]block, error) {
	var (
		out    []block
		cur    *block
		indent string
		marker string
		buf    strings.Builder
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if cur == nil {
			if m := fence.FindStringSubmatch(line); m != nil {
				indent, marker = m[1], m[2]
				cur = &block{file: name, line: n + 1, info: m[3]}
				buf.Reset()
			}
			continue
		}
		if strings.TrimSpace(line) == marker {
			cur.code = buf.String()
			out = append(out, *cur)
			cur = nil
			continue
		}
		buf.WriteString(strings.TrimPrefix(line, indent))
		buf.WriteByte('\n')
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: code block never closed", name, cur.line-1)
	}
	return out, sc.Err()
}

// isFile reports whether a block is a complete Go file: its first line
// that is neither blank nor a comment is a package clause.
func isFile(code string) bool {
	for _, line := range strings.Split(code, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		return strings.HasPrefix(line, "package ")
	}
	return false
}

// docBlocks returns every block of the documentation whose info string
// is info ("go", "yaml").
func docBlocks(t *testing.T, info string) []block {
	t.Helper()
	var out []block
	for _, name := range docFiles(t) {
		text, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := codeBlocks(name, string(text))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			if b.info == info {
				out = append(out, b)
			}
		}
	}
	return out
}

// fragmentFile wraps a fragment into a file of package docs, with a line
// directive so that errors name the Markdown file and line.
func fragmentFile(b block) string {
	var s strings.Builder
	s.WriteString("package docs\n\nimport (\n")
	for _, p := range fragmentImports {
		fmt.Fprintf(&s, "\t%q\n", p)
	}
	fmt.Fprintf(&s, ")\n\nfunc _() {\n//line %s:%d\n%s}\n", b.file, b.line, b.code)
	return s.String()
}

// forgiven reports whether a fragment may have this error: an unused
// variable or import, which a fragment leaves to the reader.
func forgiven(err error) bool {
	// go/types says "declared and not used: x" and "\"fmt\" imported and
	// not used" (or "imported as x and not used").
	return strings.Contains(err.Error(), "and not used")
}

// TestGoBlocksCompile type-checks every Go block of README.md and
// docs/*.md (see the package comment for the two kinds of block).
func TestGoBlocksCompile(t *testing.T) {
	blocks := docBlocks(t, "go")
	u := loadUniverse(t)
	fset := u.fset
	nested := nestedImporters(t, fset, blocks) // the gRPC module's page

	prelude, err := parser.ParseFile(fset, filepath.Join("testdata", "prelude.go"), nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}

	files := 0
	for _, b := range blocks {
		name := fmt.Sprintf("%s:%d", b.file, b.line)
		complete := isFile(b.code)
		imp := u.imp
		if complete {
			if dir := moduleOf(fileImports(b.code)); dir != "." {
				imp = nested[dir]
			}
		}
		src := fmt.Sprintf("//line %s:%d\n%s", b.file, b.line, b.code)
		if !complete {
			src = fragmentFile(b)
		}
		// The line directive names the Markdown file; only a fragment's
		// wrapper, above it, keeps this name, which has no directory: the
		// directive's relative name would be taken as relative to it.
		f, err := parser.ParseFile(fset, filepath.Base(b.file)+" (fragment wrapper)", src, parser.ParseComments)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		pkgFiles := []*ast.File{f}
		if !complete {
			pkgFiles = append(pkgFiles, prelude)
		}
		var errs []error
		conf := types.Config{Importer: imp, Error: func(err error) {
			if complete || !forgiven(err) {
				errs = append(errs, err)
			}
		}}
		pkg, _ := conf.Check(f.Name.Name, fset, pkgFiles, nil)
		for _, err := range errs {
			t.Errorf("%v", err)
		}
		if complete {
			files++
			if f.Name.Name == "main" && pkg != nil && pkg.Scope().Lookup("main") == nil {
				t.Errorf("%s: package main without func main", name)
			}
		}
	}
	// The quick start's programs are complete files: a reader copies them
	// and runs them as they are.
	if files < 2 {
		t.Errorf("found %d complete Go files in the documentation; the README's quick start has two", files)
	}
	t.Logf("%d Go blocks checked, %d of them complete files", len(blocks), files)
}
