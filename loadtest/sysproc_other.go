//go:build !linux

package main

import "syscall"

// sysProcAttr has nothing to add where the kernel cannot tie a child's life
// to its parent's; there the servers are stopped only by this program's own
// cleanup. (The load test needs Linux anyway: elsewhere 127.0.0.1 is often
// the only loopback address a socket can bind to.)
func sysProcAttr() *syscall.SysProcAttr { return nil }
