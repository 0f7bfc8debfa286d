//go:build scale

package redisstore

// stepsOf is how many steps a long differential test takes under make
// test-scale: its full run.
func stepsOf(full int) int { return full }
