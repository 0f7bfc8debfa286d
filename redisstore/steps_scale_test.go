//go:build scale

package redisstore

// stepsOf is how many steps a long differential test takes under make
// test-scale: its full run.
func stepsOf(full int) int { return full }

// wholeMatrix reports whether a test of a large matrix of cases runs them
// all: under make test-scale it does.
func wholeMatrix() bool { return true }

// partOf returns 1: make test-scale runs every key (see steps_test.go).
func partOf(int) int { return 1 }
