// Package docstest holds the test that keeps the documentation honest:
// every ```go block of README.md and docs/*.md must compile against the
// module's current API, and every relative link must lead somewhere.
//
// A block is checked one of two ways:
//
//   - A block whose first line of code is a package clause is a complete
//     file. It is type-checked on its own, as a package of its own, and
//     every error counts (an unused import or variable included); a
//     package main must declare func main.
//   - Any other block is a fragment: statements, as in the body of a
//     function. It is type-checked inside func _() { ... } in a package
//     that imports the module's packages and their usual companions under
//     their usual names (see fragmentImports) and declares the names of
//     testdata/prelude.go (ctx, client, store, limiter, logger, r, and a
//     few handlers). Only an unused variable or import is forgiven, since a
//     fragment shows one step and leaves the rest to the reader.
//
// A block that must not be checked (Go shown for contrast, never to be
// compiled) is written with another info string; none is today.
package docstest
