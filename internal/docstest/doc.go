// Package docstest holds the tests that keep the documentation honest:
// the Go in it compiles against the module's current API, every Go name it
// mentions exists, and every relative link leads somewhere.
//
// Every ```go block of README.md and docs/*.md is checked one of two ways:
//
//   - A block whose first line of code is a package clause is a complete
//     file. It is type-checked on its own, as a package of its own, and
//     every error counts (an unused import or variable included); a
//     package main must declare func main.
//   - Any other block is a fragment: statements, as in the body of a
//     function. It is type-checked inside func _() { ... } in a package
//     that imports the module's packages and their usual companions under
//     their usual names (see fragmentImports) and declares the names of
//     testdata/prelude.go (ctx, client, store, limiter, logger, r, rt, and
//     a few handlers). Only an unused variable or import is forgiven, since a
//     fragment shows one step and leaves the rest to the reader.
//
// A block that must not be checked (Go shown for contrast, never to be
// compiled) is written with another info string; none is today.
//
// The code blocks of the doc comments of every package of the module
// (indented by a tab) that parse as Go statements or declarations are
// type-checked the same way as fragments, with sampleImports; a sample may
// also leave variables undeclared (mux, verifyJWT), but a package's name
// it uses must exist and every call must fit (TestDocCommentSamplesCompile).
//
// Go names written pkg.Name or pkg.Name.Member, for the module's packages
// and the packages fragments import, must exist wherever the documentation
// mentions them: the Markdown outside Go blocks, the files under deploy/
// (the alerts' runbooks, the dashboard's descriptions) and the doc
// comments of every package of the module, tests included, where doc
// links to the comment's own package count too (TestNamesExist). Names
// are resolved against the compiler's export data of the packages, which
// `go list -export` builds, so fields and promoted methods count; a name
// that only a test declares (metrics.TestScrape) counts in doc comments.
//
// "The module" is the root module and the modules of its integrations,
// the example and the command (workspaceModules), checked as one through
// a go.work file the tests write in a temporary folder: their docs and
// doc comments use one another's packages. The gRPC module's complete
// files are checked against its own dependencies (nestedModules).
package docstest
