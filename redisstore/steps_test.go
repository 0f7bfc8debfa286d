//go:build !scale

package redisstore

// stepsOf is how many steps a long differential test takes in make test:
// a quarter of its full run, which make test-scale takes (steps_scale_test.go).
func stepsOf(full int) int { return full / 4 }

// wholeMatrix reports whether a test of a large matrix of cases runs them
// all, as under make test-scale, or a part that still takes every value of
// each dimension, as in make test.
func wholeMatrix() bool { return false }

// partOf returns n in make test, where a test of many keys that already
// takes stepsOf of them takes a further 1/n, and 1 in make test-scale.
func partOf(n int) int { return n }
