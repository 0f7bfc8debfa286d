// Package testredis starts a throwaway redis-server for the module's tests:
// a small copy of the repository's internal/redistest, which a module of
// its own cannot import.
//
// The server listens on a free loopback port below 55000, keeps nothing on
// disk, works in the test's temporary folder and is stopped by its PID when
// the test ends. Where redis-server is not installed the test skips, unless
// CI is "true": then it fails, since CI must run the real-Redis tests.
package testredis

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	portMin      = 20000
	portMax      = 54999
	readyTimeout = 10 * time.Second
	stopTimeout  = 5 * time.Second
	attempts     = 10
)

// Start starts redis-server and returns its "127.0.0.1:port" address once
// it answers PING.
func Start(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if strings.EqualFold(os.Getenv("CI"), "true") {
			t.Fatal("redis-server not found; CI requires the real-Redis tests")
		}
		t.Skip("redis-server not found on PATH; skipping the real-Redis tests")
	}
	var last error
	for range attempts {
		port := portMin + rand.IntN(portMax-portMin+1)
		if !free(port) {
			continue
		}
		addr, err := launch(t, port)
		if err == nil {
			return addr
		}
		last = err
	}
	t.Fatalf("testredis: no server started in %d attempts: %v", attempts, last)
	return ""
}

// free reports whether a loopback port can be bound now.
func free(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	return l.Close() == nil
}

// launch starts one server on port and waits for it; the server is stopped
// when the test ends, or at once when it does not come up.
func launch(t testing.TB, port int) (string, error) {
	dir := t.TempDir()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command("redis-server",
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(stopTimeout):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			return "", fmt.Errorf("redis-server on port %d exited: %s", port, log)
		default:
		}
		if ping(addr) {
			t.Cleanup(stop)
			return addr, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	return "", fmt.Errorf("redis-server on port %d did not answer PING within %v", port, readyTimeout)
}

// ping reports whether a server at addr answers PING.
func ping(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}
