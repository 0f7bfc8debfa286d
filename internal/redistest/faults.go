package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// restartTimeout bounds Restart's wait for the old port to be free again.
const restartTimeout = 10 * time.Second

// Kill ends the server with SIGKILL, as a crash would, and returns once the
// process has been reaped. Killing a server that is stopped already does
// nothing.
func (s *Server) Kill() {
	s.once.Do(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
	})
}

// Restart starts the server again, after Stop or Kill, on the same port and
// in the same folder, and waits until it answers PING. A server without
// persistence comes back empty. It fails the test if the server cannot
// start within a few seconds.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	deadline := time.Now().Add(restartTimeout)
	for {
		err := s.relaunch()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || !strings.Contains(s.Log(), "Address already in use") {
			s.t.Fatalf("redistest: restarting %s: %v\nserver log:\n%s", s.Addr, err, s.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// relaunch starts a new process with the server's arguments. Only the test's
// goroutine calls it, after the old process has exited.
func (s *Server) relaunch() error {
	cmd := exec.Command("redis-server", s.args...)
	cmd.Dir = s.Dir
	cmd.SysProcAttr = sysProcAttr()
	logFile, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited, s.once = cmd, exited, sync.Once{}
	if err := s.waitReady(); err != nil {
		s.Stop()
		return err
	}
	return nil
}

// Freeze stops the server's process with SIGSTOP: its connections stay
// open and nothing answers, as with a server stuck in a long command or a
// host that froze. Thaw (or the end of the test) resumes it.
func (s *Server) Freeze() { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server.
func (s *Server) Thaw() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

// Do sends one command to the server on a fresh connection and returns the
// reply as text (an array's elements joined by newlines).
func (s *Server) Do(args ...string) (string, error) {
	return command(s.Addr, 2*time.Second, args...)
}
