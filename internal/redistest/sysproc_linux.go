package redistest

import "syscall"

// sysProcAttr asks the kernel to kill the server if the test binary dies
// without running its cleanups (a test timeout panics and exits at once, for
// example), so that no orphaned server keeps holding a port or a temporary
// folder. Strictly the signal fires when the OS thread that started the
// server ends; Go ends a thread early only when a goroutine locked to it
// exits without unlocking, which neither this package nor the code it tests
// does, so in practice it fires when the test binary exits.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
