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
	"sync"
	"testing"
)

// universe is what the checks resolve names against: the compiler's
// export data of the module's packages and of the packages the
// documentation imports, read through one importer.
type universe struct {
	fset *token.FileSet
	imp  types.Importer
	// qualifiers maps a package name, as documentation qualifies names
	// with it ("middleware" in middleware.New), to its import path.
	qualifiers map[string]string
	// dirs maps a module package's directory, relative to root and
	// slash-separated, to its import path ("." for the root).
	dirs map[string]string
	// mains are the import paths of the module's commands.
	mains map[string]bool
}

var (
	loadOnce   sync.Once
	loaded     *universe
	loadFailed error
)

// loadUniverse builds the universe once for all the tests: `go list
// -export` compiles what it lists, so one call serves them all.
func loadUniverse(t *testing.T) *universe {
	t.Helper()
	loadOnce.Do(func() { loaded, loadFailed = newUniverse() })
	if loadFailed != nil {
		t.Fatal(loadFailed)
	}
	return loaded
}

func newUniverse() (*universe, error) {
	paths, err := docImports()
	if err != nil {
		return nil, err
	}
	args := append([]string{"list", "-e", "-export", "-deps", "-f",
		"{{.ImportPath}}\t{{.Name}}\t{{.Export}}\t{{.Dir}}\t{{with .Module}}{{.Main}}{{end}}", "./..."}, paths...)
	work, err := workspace()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(filepath.Dir(work))
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK="+work)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export: %v\n%s", err, stderr.String())
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	u := &universe{fset: token.NewFileSet(), qualifiers: map[string]string{}, dirs: map[string]string{}, mains: map[string]bool{}}
	exports := map[string]string{}
	names := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			return nil, fmt.Errorf("go list: unexpected line %q", line)
		}
		path, name, export, dir, main := f[0], f[1], f[2], f[3], f[4] == "true"
		exports[path], names[path] = export, name
		if !main {
			continue
		}
		rel, err := filepath.Rel(absRoot, dir)
		if err != nil {
			return nil, err
		}
		u.dirs[filepath.ToSlash(rel)] = path
		if name == "main" {
			u.mains[path] = true
		} else {
			u.qualifiers[name] = path // the module's own names come first
		}
	}
	for _, p := range paths {
		if _, taken := u.qualifiers[names[p]]; !taken && names[p] != "" && names[p] != "main" {
			u.qualifiers[names[p]] = p
		}
	}
	u.imp = importer.ForCompiler(u.fset, "gc", func(path string) (io.ReadCloser, error) {
		file := exports[path]
		if file == "" {
			return nil, fmt.Errorf("no export data for %q (add it to fragmentImports, or import it in a complete file)", path)
		}
		return os.Open(file)
	})
	return u, nil
}

// workspaceModules are the folders, relative to root, of the modules the
// documentation is checked against as one: the root's and those of its
// integrations, which the fragments use beside the core. The gRPC module
// has complete files of its own (nestedModules); bench and docs/plots are
// no part of the documented API.
var workspaceModules = []string{".", "cmd", "config", "deploy", "example", "httpratecounter", "keyfunc/jwtkey", "metrics", "otelmetrics"}

// workspace writes a go.work file that uses workspaceModules, in a
// temporary folder of its own, and returns its path: `go list` run with
// GOWORK set to it resolves every module's packages from the working tree,
// so ./... at root lists them all.
func workspace() (string, error) {
	dir, err := os.MkdirTemp("", "docstest-work")
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("go 1.25.0\n\nuse (\n")
	for _, m := range workspaceModules {
		abs, err := filepath.Abs(filepath.Join(root, m))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "\t%q\n", abs)
	}
	b.WriteString(")\n")
	work := filepath.Join(dir, "go.work")
	return work, os.WriteFile(work, []byte(b.String()), 0o644)
}

// docImports returns the packages documentation may use: sampleImports
// (fragmentImports among them) and what the complete files of the
// Markdown import.
func docImports() ([]string, error) {
	paths := append([]string(nil), sampleImports...)
	for _, name := range markdownFiles() {
		text, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			return nil, err
		}
		blocks, err := codeBlocks(name, string(text))
		if err != nil {
			return nil, err
		}
		for _, b := range blocks {
			if b.info == "go" && isFile(b.code) {
				if imports := fileImports(b.code); moduleOf(imports) == "." {
					paths = append(paths, imports...)
				}
			}
		}
	}
	return paths, nil
}

// pkg returns the package of an import path, from its export data, or nil
// for one without (a directory of tests only).
func (u *universe) pkg(path string) *types.Package {
	imp, ok := u.imp.(types.ImporterFrom)
	var (
		p   *types.Package
		err error
	)
	if ok {
		p, err = imp.ImportFrom(path, root, 0)
	} else {
		p, err = u.imp.Import(path)
	}
	if err != nil {
		return nil
	}
	return p
}
