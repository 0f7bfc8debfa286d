package docstest

import (
	"fmt"
	"go/types"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// ref is a Go name that documentation mentions: pkg.Name or
// pkg.Name.Member, or, in a doc link of a Go comment, Name or Name.Member
// of the comment's own package (pkg empty).
type ref struct {
	line   int
	pkg    string
	name   string
	member string
}

func (r ref) String() string {
	s := r.name
	if r.pkg != "" {
		s = r.pkg + "." + s
	}
	if r.member != "" {
		s += "." + r.member
	}
	return s
}

// qualifiedPattern matches pkg.Name and pkg.Name.Member for the given
// package names: the name exported, the member taken only when it is too
// (a lower-case word after it is a file's extension or prose). Text right
// before the package name that would make it part of something longer (an
// import path, a domain, another selector) rules the match out.
func qualifiedPattern(pkgs []string) *regexp.Regexp {
	sort.Slice(pkgs, func(i, j int) bool { return len(pkgs[i]) > len(pkgs[j]) })
	for i, p := range pkgs {
		pkgs[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`(?:^|[^\w./-])(` + strings.Join(pkgs, "|") +
		`)\.([A-Z]\w*)(?:\.([A-Z]\w*))?`)
}

// qualifiedRefs returns the qualified names each line of text mentions;
// lines count from first.
func qualifiedRefs(pattern *regexp.Regexp, text string, first int) []ref {
	var out []ref
	for i, line := range strings.Split(text, "\n") {
		for _, m := range pattern.FindAllStringSubmatch(line, -1) {
			out = append(out, ref{line: first + i, pkg: m[1], name: m[2], member: m[3]})
		}
	}
	return out
}

// docLink matches a doc link of a Go comment, a name or Name.Member in
// brackets (https://go.dev/doc/comment#doclinks), when no word touches its
// brackets: s[N] is an index, not a link.
var docLink = regexp.MustCompile(`(?:^|[^\w\]])\[([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?(?:\.([A-Za-z_]\w*))?\]($|[^\w(\[:])`)

// docLinkRefs returns the doc links of one line of a Go comment that name
// an exported name of the comment's own package (pkg empty). Those that
// start with a package name the documentation knows are qualified names,
// which qualifiedRefs finds.
func docLinkRefs(line string, n int, known map[string]string) []ref {
	var out []ref
	for _, m := range docLink.FindAllStringSubmatch(line, -1) {
		a, b, c := m[1], m[2], m[3]
		switch {
		case known[a] != "", c != "", !exported(a):
			// A link to a package or into one; a three-part link starts
			// with a package this test does not know; a lower-case name
			// is not a link.
		default:
			out = append(out, ref{line: n, name: a, member: b})
		}
	}
	return out
}

func exported(name string) bool {
	for _, r := range name {
		return unicode.IsUpper(r)
	}
	return false
}

// resolve reports why r names nothing in p, or nil when it names a
// package-level name of p, or a field or method of one.
func resolve(p *types.Package, r ref) error {
	obj := p.Scope().Lookup(r.name)
	if obj == nil {
		return fmt.Errorf("%s: package %s has no %s", r, p.Name(), r.name)
	}
	if r.member == "" {
		return nil
	}
	switch obj.(type) {
	case *types.TypeName, *types.Var:
	default:
		return fmt.Errorf("%s: %s.%s is a %s, with no members", r, p.Name(), r.name, kind(obj))
	}
	if m, _, _ := types.LookupFieldOrMethod(obj.Type(), true, p, r.member); m == nil {
		return fmt.Errorf("%s: %s.%s has no field or method %s", r, p.Name(), r.name, r.member)
	}
	return nil
}

// kind names what sort of object obj is, for messages.
func kind(obj types.Object) string {
	switch obj.(type) {
	case *types.Func:
		return "function"
	case *types.Const:
		return "constant"
	}
	return "name"
}

// check resolves r against the universe's packages by its qualifier.
func (u *universe) check(r ref) error {
	p := u.pkg(u.qualifiers[r.pkg])
	if p == nil {
		return fmt.Errorf("%s: cannot load package %s", r, r.pkg)
	}
	return resolve(p, r)
}

// pattern is the qualified-name pattern for every package the universe
// knows by name.
func (u *universe) pattern() *regexp.Regexp {
	var names []string
	for name := range u.qualifiers {
		names = append(names, name)
	}
	return qualifiedPattern(names)
}
