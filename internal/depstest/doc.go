// Package depstest holds the test that keeps the core module light: what
// a program imports from it compiles no integration's dependency.
package depstest
