package docstest

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/config"
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
	"github.com/redlimit/redlimit/memstore",
	"github.com/redlimit/redlimit/metrics",
	"github.com/redlimit/redlimit/middleware",
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
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, f := range files {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
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

// nestedModules are the repository's modules beside the root one, each
// with the import paths that only it resolves: a complete file that
// imports one of them is type-checked against that module's dependencies
// (the gRPC module's page, docs/grpc.md). Fragments are the root's.
var nestedModules = []struct {
	dir      string // relative to root
	prefixes []string
}{
	{"grpclimit", []string{
		"github.com/redlimit/redlimit/grpclimit",
		"google.golang.org/grpc",
		"google.golang.org/genproto/",
		"github.com/grpc-ecosystem/",
	}},
}

// moduleOf returns the folder, relative to root, of the module whose
// dependencies a file with these imports is checked against: "." for the
// root module.
func moduleOf(imports []string) string {
	for _, m := range nestedModules {
		for _, imp := range imports {
			for _, p := range m.prefixes {
				if strings.HasPrefix(imp, p) {
					return m.dir
				}
			}
		}
	}
	return "."
}

// fileImports returns the import paths of a complete file, nil when it
// does not parse (reported when it is checked).
func fileImports(fset *token.FileSet, code string) []string {
	f, err := parser.ParseFile(fset, "", code, parser.ImportsOnly)
	if err != nil {
		return nil
	}
	var paths []string
	for _, imp := range f.Imports {
		paths = append(paths, strings.Trim(imp.Path.Value, `"`))
	}
	return paths
}

// exportImporter type-checks imports from the compiler's export data, which
// `go list -export`, run in the module at dir (relative to root), builds
// for every package the blocks import and their dependencies.
func exportImporter(t *testing.T, fset *token.FileSet, dir string, paths []string) types.Importer {
	t.Helper()
	args := append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, paths...)
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join(root, dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, file, _ := strings.Cut(line, "\t")
		exports[path] = file
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %q (add it to fragmentImports, or import it in a complete file)", path)
		}
		return os.Open(file)
	})
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
	fset := token.NewFileSet()

	prelude, err := parser.ParseFile(fset, filepath.Join("testdata", "prelude.go"), nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	// Each block's module, and the paths to build export data for in each.
	modules := make([]string, len(blocks))
	paths := map[string][]string{".": append([]string(nil), fragmentImports...)}
	for i, b := range blocks {
		modules[i] = "."
		if !isFile(b.code) {
			continue
		}
		imports := fileImports(fset, b.code)
		modules[i] = moduleOf(imports)
		paths[modules[i]] = append(paths[modules[i]], imports...)
	}
	importers := map[string]types.Importer{}
	for dir, p := range paths {
		importers[dir] = exportImporter(t, fset, dir, p)
	}

	files := 0
	for i, b := range blocks {
		name := fmt.Sprintf("%s:%d", b.file, b.line)
		complete := isFile(b.code)
		imp := importers[modules[i]]
		src := fmt.Sprintf("//line %s:%d\n%s", b.file, b.line, b.code)
		if !complete {
			src = fragmentFile(b)
		}
		// The line directive names the Markdown file; only a fragment's
		// wrapper, above it, keeps this name.
		f, err := parser.ParseFile(fset, b.file+" (fragment wrapper)", src, parser.ParseComments)
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

// TestConfigBlocksParse parses every YAML block of the documentation that
// holds policies, as config.Load would a file: a sample a reader copies
// must load.
func TestConfigBlocksParse(t *testing.T) {
	checked := 0
	for _, b := range docBlocks(t, "yaml") {
		if !strings.Contains(b.code, "policies:") {
			continue
		}
		checked++
		// Blank lines ahead of the block make config's line numbers those
		// of the Markdown file.
		src := strings.Repeat("\n", b.line-1) + b.code
		if _, err := config.Parse([]byte(src), b.file); err != nil {
			t.Errorf("%v", err)
		}
	}
	if checked == 0 {
		t.Error("no configuration sample found in the documentation")
	}
}
