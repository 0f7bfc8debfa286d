package docstest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sampleImports are the packages a doc comment's sample may use without
// importing them: a fragment's, and what examples of tests and of
// OpenTelemetry need.
var sampleImports = append(append([]string(nil), fragmentImports...),
	"testing",
	"go.opentelemetry.io/otel",
)

// sample is a code block of a doc comment: its lines indented by a tab.
type sample struct {
	file string // relative to root
	line int    // of its first line
	code string // a tab taken off each line
}

// String names a sample by where it is, as messages do.
func (s sample) String() string { return fmt.Sprintf("%s:%d", s.file, s.line) }

// samples returns the code blocks of a doc comment. Blank comment lines
// inside a block belong to it.
func samples(c docComment) []sample {
	var (
		out  []sample
		cur  *sample
		body []string
		last int // lines of body up to its last code line
	)
	flush := func() {
		if cur != nil {
			cur.code = strings.Join(body[:last], "\n") + "\n"
			out = append(out, *cur)
		}
		cur, body, last = nil, nil, 0
	}
	for _, l := range c.lines {
		switch {
		case strings.HasPrefix(l.text, "\t"):
			if cur == nil {
				cur = &sample{file: c.file, line: l.n}
			}
			body = append(body, strings.TrimPrefix(l.text, "\t"))
			last = len(body)
		case strings.TrimSpace(l.text) == "" && cur != nil:
			body = append(body, "")
		default:
			flush()
		}
	}
	flush()
	return out
}

// placeholder matches "..." standing for code left out, as in "{ ... }"
// or a line of its own, and not a variadic argument's "xs...".
var placeholder = regexp.MustCompile(`(^|[^\w)\]])\.\.\.`)

// sampleKind tells whether code is Go, and which sort: statements (as in a
// function's body), or declarations (a file's, without package clause or
// imports). "" means it is no Go: a table, YAML, a shell command.
func sampleKind(code string) string {
	switch {
	case parses("package p\nfunc _() {\n" + code + "}\n"):
		if strings.Contains(code, ":=") || strings.Contains(code, "(") {
			return "statements"
		}
	case parses("package p\n" + code):
		return "declarations"
	}
	return ""
}

func parses(src string) bool {
	_, err := parser.ParseFile(token.NewFileSet(), "", src, parser.SkipObjectResolution)
	return err == nil
}

// sampleFile wraps a sample into a file of package docs that imports
// sampleImports, with a line directive so that errors name the Go file and
// line of the sample.
func sampleFile(s sample, kind string) string {
	var b strings.Builder
	b.WriteString("package docs\n\nimport (\n")
	for _, p := range sampleImports {
		fmt.Fprintf(&b, "\t%q\n", p)
	}
	b.WriteString(")\n\n")
	if kind == "statements" {
		b.WriteString("func _() {\n")
	}
	fmt.Fprintf(&b, "//line %s:%d\n%s", s.file, s.line, s.code)
	if kind == "statements" {
		b.WriteString("}\n")
	}
	return b.String()
}

// undefinedName matches go/types' error for a name without a package:
// a sample's variable made earlier, which it leaves to the reader.
var undefinedName = regexp.MustCompile(`undefined: [\pL_][\pL\pN_]*$`)

// sampleForgiven reports whether a sample may have this error: an unused
// variable or import, or a name it never declares (mux, verifyJWT); never
// a name a package lacks (a misspelt middleware.New), a wrong number of
// results or arguments, or a wrong type.
func sampleForgiven(err error) bool {
	return forgiven(err) || undefinedName.MatchString(err.Error())
}

// TestDocCommentSamplesCompile type-checks the Go samples of every doc
// comment of the module: code blocks that parse as Go statements or
// declarations. A sample may use the prelude's names and leave variables
// undeclared, but every package name it uses must be right, and every
// call must take and return what the sample says.
func TestDocCommentSamplesCompile(t *testing.T) {
	u := loadUniverse(t)
	pkgs, err := goPackages(u.nameOf)
	if err != nil {
		t.Fatal(err)
	}
	prelude, err := parser.ParseFile(u.fset, filepath.Join("testdata", "prelude.go"), nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range pkgs {
		for _, c := range p.comments {
			for _, s := range samples(c) {
				s.code = placeholder.ReplaceAllString(s.code, "$1   ")
				kind := sampleKind(s.code)
				if kind == "" {
					continue
				}
				checked++
				for _, err := range checkSample(u, prelude, s, kind) {
					t.Errorf("%v", err)
				}
			}
		}
	}
	if checked < 5 {
		t.Errorf("only %d Go samples found in doc comments; the package docs of config, metrics, middleware, operator and otelmetrics have one each", checked)
	}
	t.Logf("%d Go samples of doc comments checked", checked)
}

// checkSample type-checks one sample with the prelude and returns the
// errors it may not have.
func checkSample(u *universe, prelude *ast.File, s sample, kind string) []error {
	// The wrapper's name has no directory: the line directive's relative
	// name would be taken as relative to it.
	f, err := parser.ParseFile(u.fset, "sample wrapper of "+filepath.Base(s.file), sampleFile(s, kind), parser.ParseComments)
	if err != nil {
		return []error{err}
	}
	var errs []error
	conf := types.Config{Importer: u.imp, Error: func(err error) {
		if !sampleForgiven(err) {
			errs = append(errs, err)
		}
	}}
	_, _ = conf.Check("docs", u.fset, []*ast.File{f, prelude}, nil) // errors go to conf.Error
	return errs
}
