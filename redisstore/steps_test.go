//go:build !scale

package redisstore

// stepsOf is how many steps a long differential test takes in make test:
// a quarter of its full run, which make test-scale takes (steps_scale_test.go).
func stepsOf(full int) int { return full / 4 }
