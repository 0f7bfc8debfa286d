package config

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// decoder walks yaml.Nodes and collects errors that name the file, the
// line and the field.
type decoder struct {
	name  string
	errs  []error
	lines map[string]int // each field's path to the line of its key
}

// fail records an error at node n, field path.
func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, d.errAt(n.Line, path, format, args...))
}

// sortByLine orders errors of this package by their lines, stably.
func sortByLine(errs []error) {
	sort.SliceStable(errs, func(i, j int) bool {
		var a, b *Error
		errors.As(errs[i], &a)
		errors.As(errs[j], &b)
		return a != nil && b != nil && a.Line < b.Line
	})
}

// errAt makes an error at line and path.
func (d *decoder) errAt(line int, path, format string, args ...any) error {
	return &Error{File: d.name, Line: line, Field: path, Msg: fmt.Sprintf(format, args...)}
}

// err returns every recorded error, joined, in the order of their lines.
func (d *decoder) err() error {
	sortByLine(d.errs)
	return errors.Join(d.errs...)
}

// Error is a problem at a place in a configuration file. It wraps
// ErrInvalid.
type Error struct {
	File  string // the name given to Parse, or the file's base name
	Line  int    // 1-based
	Field string // the field's path, such as policies.search.limits[0].period; "" for the file
	Msg   string
}

// Error returns "file:line: field: message".
func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Field, e.Msg)
}

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

// kindName names a node's kind in errors.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "empty"
		}
		return "a scalar"
	case yaml.AliasNode:
		return "an alias"
	}
	return "a document"
}

// field is one known key of a mapping and what decodes its value.
type field struct {
	name   string
	decode func(n *yaml.Node, path string)
}

// mapping decodes a mapping whose keys must be among fields, each at most
// once. It reports whether n was a mapping.
func (d *decoder) mapping(n *yaml.Node, path string, fields ...field) bool {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping, got %s", kindName(n))
		return false
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		sub := join(path, k.Value)
		if seen[k.Value] {
			d.fail(k, sub, "given twice")
			continue
		}
		seen[k.Value] = true
		if d.lines == nil {
			d.lines = map[string]int{}
		}
		d.lines[sub] = k.Line
		found := false
		for _, f := range fields {
			if f.name == k.Value {
				f.decode(v, sub)
				found = true
				break
			}
		}
		if !found {
			d.fail(k, sub, "unknown field (known: %s)", fieldNames(fields))
		}
	}
	return true
}

// entries calls each for every key and value of a mapping whose keys are
// names chosen by the file (policies, plans).
func (d *decoder) entries(n *yaml.Node, path string, each func(k, v *yaml.Node, path string)) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping, got %s", kindName(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		sub := join(path, k.Value)
		if seen[k.Value] {
			d.fail(k, sub, "given twice")
			continue
		}
		seen[k.Value] = true
		each(k, v, sub)
	}
}

// list calls each for every item of a sequence.
func (d *decoder) list(n *yaml.Node, path string, each func(item *yaml.Node, path string)) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, "want a list, got %s", kindName(n))
		return
	}
	for i, item := range n.Content {
		each(item, fmt.Sprintf("%s[%d]", path, i))
	}
}

func fieldNames(fields []field) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// scalar checks that n is a non-null scalar and returns its text.
func (d *decoder) scalar(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		d.fail(n, path, "want a value, got %s", kindName(n))
		return "", false
	}
	return n.Value, true
}

// str decodes a string into *dst.
func (d *decoder) str(dst *string) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		if s, ok := d.scalar(n, path); ok {
			*dst = s
		}
	}
}

// integer decodes into *dst an integer within the range that bounds gives
// the field name (the last element of the path, such as "rate").
func (d *decoder) integer(dst *int, name string) func(*yaml.Node, string) {
	b := boundOf(name)
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
		// YAML makes an integer too long for int64 a float: still an
		// integer here, out of range.
		isInt := n.Tag == "!!int" || n.Tag == "!!float" && errors.Is(err, strconv.ErrRange)
		switch {
		case !isInt || err != nil && !errors.Is(err, strconv.ErrRange):
			d.fail(n, path, "want an integer, got %q", s)
		case err != nil || v < int64(b.min) || v > int64(b.max):
			d.fail(n, path, "%s is outside %s", s, b)
		default:
			*dst = int(v)
		}
	}
}

// boolean decodes true or false into *dst.
func (d *decoder) boolean(dst *bool) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		switch {
		case n.Tag == "!!bool" && (s == "true" || s == "false"):
			*dst = s == "true"
		default:
			d.fail(n, path, "want true or false, got %q", s)
		}
	}
}

// duration decodes a positive Go duration ("100ms", "1m30s") into *dst.
func (d *decoder) duration(dst *time.Duration) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		v, err := time.ParseDuration(s)
		switch {
		case err != nil:
			d.fail(n, path, "want a duration such as 100ms, 1s or 1m, got %q", s)
		case v <= 0:
			d.fail(n, path, "%s is not positive", s)
		default:
			*dst = v
		}
	}
}

// oneOf decodes one of the allowed words into *dst.
func (d *decoder) oneOf(dst *string, allowed ...string) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		for _, a := range allowed {
			if s == a {
				*dst = s
				return
			}
		}
		d.fail(n, path, "%q is not one of %s", s, strings.Join(allowed, ", "))
	}
}

// prefixes decodes a list of CIDR prefixes or bare addresses (a /32 or
// /128) into *dst. A prefix of length 0 is refused: it holds every client.
func (d *decoder) prefixes(dst *[]netip.Prefix) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		d.list(n, path, func(item *yaml.Node, path string) {
			s, ok := d.scalar(item, path)
			if !ok {
				return
			}
			p, err := netip.ParsePrefix(s)
			if err != nil {
				a, aerr := netip.ParseAddr(s)
				if aerr != nil {
					d.fail(item, path, "want a CIDR prefix such as 10.0.0.0/8 or an address, got %q", s)
					return
				}
				a = a.Unmap()
				p = netip.PrefixFrom(a, a.BitLen())
			}
			if p.Bits() == 0 || (p.Addr().Is4In6() && p.Bits() <= 96) {
				d.fail(item, path, "%s holds every address", s)
				return
			}
			if p.Addr().Zone() != "" {
				d.fail(item, path, "%s: a zone has no place in a prefix", s)
				return
			}
			*dst = append(*dst, p.Masked())
		})
	}
}
