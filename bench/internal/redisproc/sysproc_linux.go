package redisproc

import "syscall"

// SysProcAttr puts a child process in its own process group, so that Ctrl-C
// in the terminal reaches the comparison alone and it stops the child itself,
// and asks the kernel to kill the child if the comparison dies without
// stopping it (kill -9, say). Strictly that signal fires when the OS thread
// that started the child ends; Go ends a thread early only when a goroutine
// locked to it exits without unlocking, which this program never does.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func sysProcAttr() *syscall.SysProcAttr { return SysProcAttr() }
