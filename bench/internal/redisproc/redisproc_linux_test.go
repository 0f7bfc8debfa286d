package redisproc

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestThreadsRunNanos spins until this process has used some CPU time and
// checks that the threads' run time grew by as much as getrusage says,
// closer than one clock tick, the resolution of /proc/<pid>/stat.
func TestThreadsRunNanos(t *testing.T) {
	pid := os.Getpid()
	ns0, err := ThreadsRunNanos(pid)
	if err != nil {
		t.Fatal(err)
	}
	ru0 := rusage(t)
	const burn = 150 * time.Millisecond
	for rusage(t)-ru0 < burn {
		spin()
	}
	ru1 := rusage(t)
	ns1, err := ThreadsRunNanos(pid)
	if err != nil {
		t.Fatal(err)
	}
	got, want := time.Duration(ns1-ns0), ru1-ru0
	// A running thread's run time is brought up to date at the scheduler's
	// next tick (a few ms), and the readings are not simultaneous.
	if diff := (got - want).Abs(); diff > 5*time.Millisecond {
		t.Errorf("run time grew by %v, getrusage by %v: %v apart", got, want, diff)
	}
}

// rusage is this process's user plus system time from getrusage.
func rusage(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// spin keeps the CPU busy for a moment.
func spin() {
	x := 0
	for i := range 1_000_000 {
		x += i
	}
	_ = x
}
