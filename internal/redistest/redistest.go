// Package redistest starts real redis-server processes for tests.
//
// The rate limiters run Lua scripts and depend on Redis' exact semantics
// (script atomicity, key expiry, cluster slot routing, what a client sees when
// the server goes away), which an in-process fake only approximates. So the
// tests that matter run against the real server: each test gets its own
// throwaway redis-server on a free loopback port, with no persistence and its
// working files in the test's temporary folder, and the process is stopped by
// its PID when the test ends. Nothing ever touches the default port 6379 or a
// server this package did not start.
//
// Where redis-server is not installed, the tests skip, so that a plain
// "go test ./..." works on any laptop; under CI (CI=true) they fail instead,
// because a CI run that silently skips the real-Redis tests proves nothing.
package redistest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// readyTimeout bounds the wait for a fresh server to answer PING. A
	// server with no data to load is up in milliseconds; the margin is for
	// a loaded CI machine running tests under the race detector.
	readyTimeout = 10 * time.Second
	// stopTimeout bounds the wait for a clean exit after SIGTERM before the
	// server is killed outright, so a wedged server cannot hang a test run.
	stopTimeout = 5 * time.Second
	// startAttempts is how often a start is retried on a new port when the
	// chosen one was taken between picking it and the server binding it.
	startAttempts = 10
)

// Require skips the test when redis-server is not on PATH, or fails it when
// the environment variable CI is "true": CI must run the real-Redis tests,
// while a developer without Redis should still be able to run the rest.
func Require(t testing.TB) {
	t.Helper()
	requireBinaries(t, "redis-server")
}

// requireBinaries applies Require's rule to each named program.
func requireBinaries(t testing.TB, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err == nil {
			continue
		}
		if strings.EqualFold(os.Getenv("CI"), "true") {
			t.Fatalf("%s not found; CI requires the real-Redis tests: install Debian's redis-server package", name)
		}
		t.Skipf("%s not found on PATH; skipping the real-Redis tests (install Debian's redis-server package to run them)", name)
	}
}

// Server is a redis-server process owned by one test. It is stopped when the
// test ends; Stop stops it earlier, to let a test see how the code under test
// behaves when Redis goes away.
type Server struct {
	// Addr is the server's "127.0.0.1:port" address.
	Addr string
	// Dir is the server's working folder, inside the test's temporary folder.
	Dir string

	t       testing.TB
	args    []string // redis-server's arguments, for Restart
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once the process has been reaped
	once    sync.Once
}

// registry maps the address of every server whose test has not ended to its
// Server, so that Stop(t, addr) works for tests that only kept the address
// from Standalone or Cluster. A stopped server stays listed until its test
// ends, so that stopping it again by address is as harmless as Server.Stop;
// if a later server takes the same port, it replaces the entry.
var registry = struct {
	sync.Mutex
	servers map[string]*Server
}{servers: make(map[string]*Server)}

// StartServer starts a standalone redis-server on a free loopback port and
// waits until it answers PING. The server keeps nothing on disk (no RDB
// snapshots, no append-only file) and is stopped when the test ends. It
// calls Require first.
func StartServer(t testing.TB) *Server {
	t.Helper()
	Require(t)
	return start(t, pickFreePort, nil)
}

// StartServerWith starts a server like StartServer, with extra
// configuration on its command line ("--tls-port", "6380", ...).
func StartServerWith(t testing.TB, extra ...string) *Server {
	t.Helper()
	Require(t)
	return start(t, pickFreePort, extra)
}

// Standalone starts a server like StartServer and returns only its address,
// for the common test that never needs to stop it early. Stop(t, addr) still
// works on the address.
func Standalone(t testing.TB) string {
	t.Helper()
	return StartServer(t).Addr
}

// Stop stops the server that this package started at addr, as Server.Stop
// does; stopping it again is a no-op. It fails the test if this package
// started no server at addr in a test that is still running, since stopping
// anything else is never intended.
func Stop(t testing.TB, addr string) {
	t.Helper()
	registry.Lock()
	s := registry.servers[addr]
	registry.Unlock()
	if s == nil {
		t.Fatalf("redistest: this package started no server at %s (or its test has ended)", addr)
	}
	s.Stop()
}

// Stop stops the server and returns once its process has exited, so that the
// address refuses connections from then on. It sends SIGTERM and, if the
// server has not exited within a few seconds, SIGKILL. Stopping a server
// again, or concurrently, is safe and does nothing more.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGCONT) // in case Freeze stopped it
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
			return
		case <-time.After(stopTimeout):
		}
		s.t.Logf("redistest: server %s (pid %d) ignored SIGTERM for %v; killing it", s.Addr, s.cmd.Process.Pid, stopTimeout)
		_ = s.cmd.Process.Kill()
		<-s.exited
	})
}

// Log returns what the server has written to its log so far, for failure
// messages.
func (s *Server) Log() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read the server log: %v)", err)
	}
	return string(b)
}

// start launches redis-server on a port from pick, with the extra
// configuration in extra, retrying on a new port when the chosen one turns
// out to be taken. It fails the test on any other failure to start.
func start(t testing.TB, pick func() (int, error), extra []string) *Server {
	t.Helper()
	var lastLog string
	for attempt := 0; attempt < startAttempts; attempt++ {
		port, err := pick()
		if err != nil {
			t.Fatalf("redistest: no free port: %v", err)
		}
		s, err := launch(t, port, extra)
		if err == nil {
			return s
		}
		if !errors.Is(err, errPortTaken) {
			t.Fatalf("redistest: %v", err)
		}
		lastLog = err.Error()
	}
	t.Fatalf("redistest: could not bind a free port in %d attempts; last: %s", startAttempts, lastLog)
	return nil
}

// errPortTaken marks a start that failed only because another process bound
// the port first, which is worth retrying on another port.
var errPortTaken = errors.New("port taken")

// launch starts one redis-server on port and waits until it is ready. On
// failure the process has been reaped and the error carries the server log.
func launch(t testing.TB, port int, extra []string) (*Server, error) {
	t.Helper()
	// The temporary folder is made before the cleanup that stops the server
	// is registered, so that cleanups (run last-in first-out) stop the
	// server before its folder is removed.
	dir := t.TempDir()
	logPath := filepath.Join(dir, "redis.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create server log: %w", err)
	}
	defer logFile.Close() // the child holds its own descriptor

	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--daemonize", "no",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--logfile", "",
	}
	args = append(args, extra...)
	cmd := exec.Command("redis-server", args...)
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}

	s := &Server{
		Addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Dir:     dir,
		t:       t,
		args:    args,
		cmd:     cmd,
		logPath: logPath,
		exited:  make(chan struct{}),
	}
	exited := s.exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()

	if err := s.waitReady(); err != nil {
		s.Stop()
		log := s.Log()
		if strings.Contains(log, "Address already in use") {
			return nil, fmt.Errorf("%w: %s: %s", errPortTaken, s.Addr, log)
		}
		return nil, fmt.Errorf("redis-server at %s: %v\nserver log:\n%s", s.Addr, err, log)
	}

	registry.Lock()
	registry.servers[s.Addr] = s
	registry.Unlock()
	t.Cleanup(func() {
		s.Stop()
		registry.Lock()
		if registry.servers[s.Addr] == s {
			delete(registry.servers, s.Addr)
		}
		registry.Unlock()
	})
	return s, nil
}

// waitReady polls the server with PING until it answers, exits or
// readyTimeout passes.
func (s *Server) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("exited before answering PING (%v)", s.cmd.ProcessState)
		default:
		}
		reply, err := command(s.Addr, time.Second, "PING")
		if err == nil && reply == "PONG" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING within %v (last: %q, %v)", readyTimeout, reply, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pickFreePort asks the kernel for a free loopback port. The port is free
// only at that moment; start retries if the server then cannot bind it.
func pickFreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, err
	}
	return port, nil
}
