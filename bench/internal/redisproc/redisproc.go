// Package redisproc starts a throwaway redis-server for the comparison: on a
// free loopback port, with no persistence, its files in a temporary folder,
// and stops it by its PID. It also reads what the benchmarks measure of the
// server: its CPU time from /proc and its memory from INFO.
package redisproc

import (
	"context"
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
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	readyTimeout  = 10 * time.Second
	stopTimeout   = 5 * time.Second
	startAttempts = 5
)

// Server is a redis-server process started by Start.
type Server struct {
	// Addr is the server's "127.0.0.1:port" address.
	Addr string

	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
	once   sync.Once
	admin  *redis.Client

	cpuOnce   sync.Once
	ticksOnly bool  // CPUNanos reads /proc/<pid>/stat: schedstat could not be read
	hz        int64 // clock ticks per second, for ticksOnly
}

// Start starts redis-server (found on PATH) on a free loopback port and
// waits until it answers PING. The caller must call Stop, also on error
// paths; the server also dies with this process (Linux), should it exit
// without stopping it.
func Start() (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not on PATH (install Debian's redis-server package): %w", err)
	}
	var last error
	for range startAttempts {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		s, err := launch(bin, port)
		if err == nil {
			return s, nil
		}
		last = err
		if !errors.Is(err, errPortTaken) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("no free port in %d attempts: %w", startAttempts, last)
}

var errPortTaken = errors.New("port taken")

func launch(bin string, port int) (*Server, error) {
	dir, err := os.MkdirTemp("", "redlimit-bench-redis-")
	if err != nil {
		return nil, fmt.Errorf("make the server's folder: %w", err)
	}
	logPath := filepath.Join(dir, "redis.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("create the server log: %w", err)
	}
	defer logFile.Close() // the child keeps its own descriptor
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--daemonize", "no", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", "")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s := &Server{
		Addr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		dir:    dir,
		cmd:    cmd,
		exited: make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	s.admin = redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 2, MaxRetries: -1})
	if err := s.waitReady(); err != nil {
		logText, _ := os.ReadFile(logPath)
		s.Stop()
		if strings.Contains(string(logText), "Address already in use") {
			return nil, fmt.Errorf("%w: %s", errPortTaken, s.Addr)
		}
		return nil, fmt.Errorf("redis-server at %s: %w; its log:\n%s", s.Addr, err, logText)
	}
	return s, nil
}

func (s *Server) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("exited before answering PING (%v)", s.cmd.ProcessState)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.admin.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING within %v: %w", readyTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PID is the server's process ID.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Stop stops the server by its PID (SIGTERM, then SIGKILL after a few
// seconds), waits for it to exit and removes its folder. It is safe to call
// more than once and from several goroutines.
func (s *Server) Stop() {
	s.once.Do(func() {
		if s.admin != nil {
			_ = s.admin.Close()
		}
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(stopTimeout):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
		_ = os.RemoveAll(s.dir)
	})
}

// FlushAll empties the server, so that each measurement starts from an
// empty keyspace.
func (s *Server) FlushAll(ctx context.Context) error {
	if err := s.admin.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("FLUSHALL: %w", err)
	}
	return nil
}

// settle is how long UsedMemory waits for the server's periodic client
// bookkeeping (10 times a second, a few clients each time) to have visited
// every client since the last burst of traffic.
const settle = 1500 * time.Millisecond

// UsedMemory returns INFO memory's used_memory less mem_clients_normal, in
// bytes: the memory the server holds apart from its clients' query and
// output buffers, which grow and shrink with the load (tens of KiB per
// busy connection) and would otherwise swamp the data's growth. The
// server accounts for client buffers only in its periodic bookkeeping, so
// it first waits for that to catch up with the traffic just sent.
func (s *Server) UsedMemory(ctx context.Context) (int64, error) {
	select {
	case <-time.After(settle):
	case <-ctx.Done():
		return 0, fmt.Errorf("wait for redis-server's memory figures: %w", ctx.Err())
	}
	info, err := s.admin.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO memory: %w", err)
	}
	used, err := infoInt(info, "used_memory")
	if err != nil {
		return 0, err
	}
	clients, err := infoInt(info, "mem_clients_normal")
	if err != nil {
		return 0, err
	}
	return used - clients, nil
}

// infoInt returns the integer field name of an INFO reply.
func infoInt(info, name string) (int64, error) {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse INFO's %s %q: %w", name, v, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("INFO has no %s line", name)
}

// DBSize returns the number of keys in the current database.
func (s *Server) DBSize(ctx context.Context) (int64, error) {
	n, err := s.admin.DBSize(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("DBSIZE: %w", err)
	}
	return n, nil
}

// CPUTicks returns the server's user plus system CPU time so far, in clock
// ticks (see ClockTicks), read from /proc/<pid>/stat.
func (s *Server) CPUTicks() (int64, error) {
	return ProcessCPUTicks(s.PID())
}

// CPUNanos returns the server's CPU time so far in nanoseconds: the sum of
// its threads' run time from /proc/<pid>/task/*/schedstat, to the
// nanosecond, where /proc/<pid>/stat counts whole clock ticks (10 ms at
// CLK_TCK 100, a few ticks in a short run at low concurrency). Where
// schedstat cannot be read it counts CPUTicks in nanoseconds instead, and
// keeps to that source for the server's life, so that two readings always
// subtract.
func (s *Server) CPUNanos() (int64, error) {
	s.cpuOnce.Do(func() {
		_, err := ThreadsRunNanos(s.PID())
		s.ticksOnly = err != nil
		s.hz, _ = ClockTicks()
	})
	if s.ticksOnly {
		t, err := s.CPUTicks()
		return t * int64(time.Second) / s.hz, err
	}
	return ThreadsRunNanos(s.PID())
}

// ThreadsRunNanos sums the time on a CPU of every thread of a process, in
// nanoseconds: the first field of each /proc/<pid>/task/<tid>/schedstat.
// A thread that has exited is no longer counted, so it suits a process
// whose threads live as long as it does, as redis-server's do.
func ThreadsRunNanos(pid int) (int64, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("list the threads of pid %d: %w", pid, err)
	}
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if errors.Is(err, os.ErrNotExist) && t.Name() != strconv.Itoa(pid) {
			continue // a thread that ended since the listing
		}
		if err != nil {
			return 0, fmt.Errorf("read the run time of pid %d: %w", pid, err)
		}
		f, _, _ := strings.Cut(string(b), " ")
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse %s/%s/schedstat %q: %w", dir, t.Name(), b, err)
		}
		sum += n
	}
	return sum, nil
}

// SelfCPUTicks returns this process's user plus system CPU time so far, in
// clock ticks.
func SelfCPUTicks() (int64, error) {
	return ProcessCPUTicks(os.Getpid())
}

// ProcessCPUTicks reads utime + stime of a process from /proc/<pid>/stat,
// in clock ticks.
func ProcessCPUTicks(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read the CPU time of pid %d: %w", pid, err)
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// the fields after its closing parenthesis start at field 3 (state).
	text := string(b)
	i := strings.LastIndexByte(text, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, text)
	}
	fields := strings.Fields(text[i+1:])
	// utime and stime are fields 14 and 15, so 11 and 12 after state.
	if len(fields) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, text)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	return utime + stime, nil
}

// ClockTicks returns the kernel's clock ticks per second (CLK_TCK) from
// `getconf CLK_TCK`, and whether it had to assume 100 instead.
func ClockTicks() (hz int64, assumed bool) {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil && n > 0 {
			return n, false
		}
	}
	return 100, true
}

// freePort asks the kernel for a free loopback port. It is free only at
// that moment; Start retries when the server then cannot bind it.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("listen on a loopback port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("close the probe listener: %w", err)
	}
	return port, nil
}

// Version returns INFO server's redis_version.
func (s *Server) Version(ctx context.Context) (string, error) {
	info, err := s.admin.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("INFO server: %w", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, nil
		}
	}
	return "", errors.New("INFO server has no redis_version line")
}
