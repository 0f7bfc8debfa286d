package main

import "syscall"

// sysProcAttr puts each server in its own process group, so that Ctrl-C in
// the terminal reaches this program alone and it stops the servers itself,
// in order, and asks the kernel to kill a server if this program dies
// without stopping it (kill -9, say). Strictly that signal fires when the
// OS thread that started the server ends; Go ends a thread early only when
// a goroutine locked to it exits without unlocking, which this program
// never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
