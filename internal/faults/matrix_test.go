//go:build !scale

package faults

// fullMatrix reports whether the long tests run every combination of
// their cases: make test runs a part that covers each case once (the
// faults under one algorithm, each algorithm under the hardest faults),
// and make test-scale (build tag scale) runs them all.
func fullMatrix() bool { return false }
