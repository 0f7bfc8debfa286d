//go:build scale

package faults

// fullMatrix: under make test-scale every combination runs.
func fullMatrix() bool { return true }
