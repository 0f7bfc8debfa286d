//go:build !linux

package redisproc

import "syscall"

// SysProcAttr has nothing to add where the kernel cannot tie a child's life
// to its parent's; there children are stopped only by the program itself.
func SysProcAttr() *syscall.SysProcAttr { return nil }

func sysProcAttr() *syscall.SysProcAttr { return SysProcAttr() }
