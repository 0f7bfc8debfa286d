//go:build !linux

package redistest

import "syscall"

// sysProcAttr has nothing to add where the kernel cannot tie a child's life
// to its parent's; there the servers are stopped only by the test cleanups.
func sysProcAttr() *syscall.SysProcAttr { return nil }
