package docstest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// commentLine is one line of a doc comment, with the comment markers
// taken off: "//\tcode" is "\tcode".
type commentLine struct {
	n    int
	text string
}

// docComment is a doc comment of a Go file: a package's, a declaration's,
// a field's or a method's in an interface.
type docComment struct {
	file  string // relative to root, slash-separated
	dir   string // the file's directory, relative to root
	lines []commentLine
	// imports maps the names of the packages the file imports, as they
	// name themselves (not as the file renames them), to their paths: in
	// a file that imports chi's middleware package under any name, a name
	// qualified by "middleware" is chi's.
	imports map[string]string
}

// goPackage is one directory of Go files of the main module: its doc
// comments and the names it declares (see declaredNames).
type goPackage struct {
	dir      string
	comments []docComment
	names    map[string]bool
}

// moduleGoFiles returns the main module's Go files by directory, relative
// to root: every directory but hidden ones, testdata and other modules'.
func moduleGoFiles() (map[string][]string, error) {
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path) // path is under root
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && !slices.Contains(workspaceModules, rel) {
				return filepath.SkipDir // a module checked on its own (grpclimit) or not at all
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") {
			out[filepath.ToSlash(filepath.Dir(rel))] = append(out[filepath.ToSlash(filepath.Dir(rel))], rel)
		}
		return nil
	})
	return out, err
}

// goPackages parses every Go file of the main module, tests included;
// nameOf gives the name of an imported package by its path ("" if
// unknown).
func goPackages(nameOf func(path string) string) ([]goPackage, error) {
	byDir, err := moduleGoFiles()
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var out []goPackage
	for dir, files := range byDir {
		p := goPackage{dir: dir, names: map[string]bool{}}
		for _, name := range files {
			f, err := parser.ParseFile(fset, filepath.Join(root, name), nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			declaredNames(f, p.names)
			imports := map[string]string{}
			for _, imp := range f.Imports {
				path := strings.Trim(imp.Path.Value, `"`)
				if n := nameOf(path); n != "" {
					imports[n] = path
				}
			}
			for _, g := range docGroups(f) {
				p.comments = append(p.comments, docComment{file: name, dir: dir, lines: commentLines(fset, g), imports: imports})
			}
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dir < out[j].dir })
	return out, nil
}

// docGroups returns a file's doc comments: the package's, and those of
// declarations, specs, fields and interface methods, in order.
func docGroups(f *ast.File) []*ast.CommentGroup {
	var out []*ast.CommentGroup
	add := func(gs ...*ast.CommentGroup) {
		for _, g := range gs {
			if g != nil {
				out = append(out, g)
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.File:
			add(n.Doc)
		case *ast.FuncDecl:
			add(n.Doc)
		case *ast.GenDecl:
			add(n.Doc)
		case *ast.TypeSpec:
			add(n.Doc, n.Comment)
		case *ast.ValueSpec:
			add(n.Doc, n.Comment)
		case *ast.Field:
			add(n.Doc, n.Comment)
		case *ast.BlockStmt:
			return false // comments in bodies document nothing
		}
		return true
	})
	return out
}

// commentLines returns a comment group's lines, numbered as in the file.
func commentLines(fset *token.FileSet, g *ast.CommentGroup) []commentLine {
	var out []commentLine
	for _, c := range g.List {
		n := fset.Position(c.Slash).Line
		if text, ok := strings.CutPrefix(c.Text, "//"); ok {
			out = append(out, commentLine{n: n, text: strings.TrimPrefix(text, " ")})
			continue
		}
		text := strings.TrimSuffix(strings.TrimPrefix(c.Text, "/*"), "*/")
		for i, line := range strings.Split(text, "\n") {
			out = append(out, commentLine{n: n + i, text: line})
		}
	}
	return out
}

// declaredNames adds f's package-level names to names, and Type.Member
// for each method, struct field and interface method.
func declaredNames(f *ast.File, names map[string]bool) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				names[d.Name.Name] = true
				continue
			}
			names[receiverName(d.Recv.List[0].Type)+"."+d.Name.Name] = true
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names[s.Name.Name] = true
					memberNames(s, names)
				case *ast.ValueSpec:
					for _, id := range s.Names {
						names[id.Name] = true
					}
				}
			}
		}
	}
}

// memberNames adds Type.Member for a struct's fields or an interface's
// methods.
func memberNames(s *ast.TypeSpec, names map[string]bool) {
	var fields *ast.FieldList
	switch t := s.Type.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return
	}
	for _, fd := range fields.List {
		for _, id := range fd.Names {
			names[s.Name.Name+"."+id.Name] = true
		}
		if len(fd.Names) == 0 {
			names[s.Name.Name+"."+receiverName(fd.Type)] = true // embedded
		}
	}
}

// receiverName is the type's name in a receiver or an embedded field:
// T, *T, T[P], pkg.T.
func receiverName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}
