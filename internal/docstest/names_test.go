package docstest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNamesExist checks that every Go name the documentation mentions
// exists: pkg.Name and pkg.Name.Member, for the module's packages and the
// packages fragments may use, in the Markdown (outside Go blocks, which
// TestGoBlocksCompile checks), in deploy/ (the alerts' runbooks, the
// dashboard's descriptions) and in the doc comments of every package of
// the module; and in doc comments, doc links to the comment's own package
// (a name or Type.Method in brackets).
func TestNamesExist(t *testing.T) {
	u := loadUniverse(t)
	pattern := u.pattern()
	sources := []struct {
		name  string
		texts func() ([]text, error)
	}{
		{"markdown", markdownTexts},
		{"deploy", deployTexts},
	}
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			texts, err := src.texts()
			if err != nil {
				t.Fatal(err)
			}
			found := 0
			for _, txt := range texts {
				for _, r := range qualifiedRefs(pattern, txt.body, 1) {
					found++
					if err := u.check(r); err != nil {
						t.Errorf("%s:%d: %v", txt.file, r.line, err)
					}
				}
			}
			if found == 0 {
				t.Error("no Go names found: is the pattern broken?")
			}
			t.Logf("%d names checked in %d files", found, len(texts))
		})
	}
	t.Run("go doc comments", func(t *testing.T) {
		pkgs, err := goPackages(u.nameOf)
		if err != nil {
			t.Fatal(err)
		}
		byPath := map[string]goPackage{}
		for _, p := range pkgs {
			byPath[u.dirs[p.dir]] = p
		}
		found := 0
		for _, p := range pkgs {
			for _, c := range p.comments {
				for _, r := range commentRefs(pattern, c, u.qualifiers) {
					found++
					err := u.checkIn(c, byPath, r)
					switch {
					case err == nil:
					case pendingDrift[c.file+": "+r.String()] != "":
						t.Logf("%s:%d: %v (pending: %s)", c.file, r.line, err, pendingDrift[c.file+": "+r.String()])
					default:
						t.Errorf("%s:%d: %v", c.file, r.line, err)
					}
				}
			}
		}
		if found == 0 {
			t.Error("no Go names found in doc comments: is the pattern broken?")
		}
		t.Logf("%d names checked in the doc comments of %d directories", found, len(pkgs))
	})
}

// pendingDrift are names in doc comments that name nothing, in packages
// whose fix belongs to another change: each is logged, not failed, until
// it is fixed. Keys are "file: name"; remove an entry once its file is
// right.
var pendingDrift = map[string]string{}

// commentRefs returns the names a doc comment mentions: qualified ones on
// every line, doc links outside its code blocks.
func commentRefs(pattern *regexp.Regexp, c docComment, known map[string]string) []ref {
	var out []ref
	for _, l := range c.lines {
		out = append(out, qualifiedRefs(pattern, l.text, l.n)...)
		if !strings.HasPrefix(l.text, "\t") && !strings.HasPrefix(l.text, "  ") {
			out = append(out, docLinkRefs(l.text, l.n, known)...)
		}
	}
	return out
}

// checkIn resolves r as doc comment c sees it: a qualified name by the
// package the file imports under that name, else by the module's or
// fragments' package of that name; a doc link in c's own package. Test
// files count: a comment may name a test of another package
// (metrics.TestScrape).
func (u *universe) checkIn(c docComment, pkgs map[string]goPackage, r ref) error {
	path := u.dirs[c.dir]
	if r.pkg != "" {
		path = c.imports[r.pkg]
		if path == "" {
			path = u.qualifiers[r.pkg]
		}
	}
	p := u.pkg(path)
	if p == nil && r.pkg != "" {
		return fmt.Errorf("%s: cannot load package %s", r, path)
	}
	var err error
	if p != nil {
		if err = resolve(p, r); err == nil {
			return nil
		}
	}
	name := r.name
	if r.member != "" {
		name += "." + r.member
	}
	if dir, ok := pkgs[path]; ok && dir.names[name] {
		return nil
	}
	if r.pkg == "" {
		return fmt.Errorf("[%s]: doc link to nothing: package %s declares no %s", name, c.dir, name)
	}
	return err
}

// nameOf returns the name of the package at path, "" if it has no export
// data.
func (u *universe) nameOf(path string) string {
	if p := u.pkg(path); p != nil {
		return p.Name()
	}
	return ""
}

// text is a file's text as the names are looked for in it.
type text struct {
	file string // relative to root
	body string
}

// markdownTexts returns README.md and docs/*.md with their Go blocks
// blanked, line for line.
func markdownTexts() ([]text, error) {
	var out []text
	for _, name := range markdownFiles() {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			return nil, err
		}
		blocks, err := codeBlocks(name, string(b))
		if err != nil {
			return nil, err
		}
		lines := strings.Split(string(b), "\n")
		for _, bl := range blocks {
			if bl.info != "go" {
				continue
			}
			for i := range strings.Count(bl.code, "\n") {
				lines[bl.line-1+i] = ""
			}
		}
		out = append(out, text{file: name, body: strings.Join(lines, "\n")})
	}
	return out, nil
}

// escapes are the escapes of JSON and of YAML's double-quoted strings
// that can sit right before a name ("\nDo: ... algorithms.New"): each turns
// into two spaces, so that columns and lines stay.
var escapes = strings.NewReplacer(`\n`, "  ", `\t`, "  ", `\"`, "  ")

// deployTexts returns every file under deploy/ but its Go tests: the
// Prometheus rules and their tests, the Grafana dashboard.
func deployTexts() ([]text, error) {
	var out []text
	err := filepath.WalkDir(filepath.Join(root, "deploy"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path) // path is under root
		out = append(out, text{file: filepath.ToSlash(rel), body: escapes.Replace(string(b))})
		return nil
	})
	return out, err
}
