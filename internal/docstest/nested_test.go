package docstest

import (
	"bytes"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

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

// nestedImporters returns, for each nested module that a complete block
// imports from, an importer of the export data `go list -export` builds
// in that module for what its blocks import.
func nestedImporters(t *testing.T, fset *token.FileSet, blocks []block) map[string]types.Importer {
	t.Helper()
	paths := map[string][]string{}
	for _, b := range blocks {
		if !isFile(b.code) {
			continue
		}
		imports := fileImports(b.code)
		if dir := moduleOf(imports); dir != "." {
			paths[dir] = append(paths[dir], imports...)
		}
	}
	out := map[string]types.Importer{}
	for dir, p := range paths {
		out[dir] = exportImporter(t, fset, dir, p)
	}
	return out
}

// exportImporter type-checks imports from the compiler's export data, which
// `go list -export`, run in the module at dir (relative to root), builds
// for paths and their dependencies.
func exportImporter(t *testing.T, fset *token.FileSet, dir string, paths []string) types.Importer {
	t.Helper()
	args := append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, paths...)
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join(root, dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export in %s: %v\n%s", dir, err, stderr.String())
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, file, _ := strings.Cut(line, "\t")
		exports[path] = file
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file := exports[path]
		if file == "" {
			return nil, fmt.Errorf("no export data for %q in module %s", path, dir)
		}
		return os.Open(file)
	})
}
