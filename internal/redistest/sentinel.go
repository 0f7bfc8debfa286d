package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Sentinel timings: short, so that a failover takes seconds. A master is
// down after SentinelDownAfter without an answer; a failover then takes
// about as long again.
const (
	SentinelDownAfter = time.Second
	sentinelFailover  = 5 * time.Second
	sentinelCount     = 3
	// failoverTimeout bounds WaitFailover.
	failoverTimeout = 30 * time.Second
)

// SentinelSet is a master, its replica and three Sentinels watching them,
// all owned by one test.
type SentinelSet struct {
	// MasterName is the name the Sentinels know the master by.
	MasterName string
	// Master and Replica are the data servers as started.
	Master, Replica *Server
	// Addrs are the Sentinels' addresses, for go-redis's FailoverClient.
	Addrs []string

	t         testing.TB
	sentinels []*exec.Cmd
}

// StartSentinel starts a master, a replica of it and three Sentinels with a
// quorum of two, and returns once the replica is in sync and every Sentinel
// knows the master and the replica. Everything is stopped when the test
// ends. It needs redis-server and redis-sentinel, and skips or fails as
// Require does.
func StartSentinel(t testing.TB) *SentinelSet {
	t.Helper()
	requireBinaries(t, "redis-server", "redis-sentinel")
	ss := &SentinelSet{MasterName: "mymaster", t: t}
	ss.Master = StartServer(t)
	_, port, _ := net.SplitHostPort(ss.Master.Addr)
	ss.Replica = start(t, pickFreePort, []string{"--replicaof", "127.0.0.1", port})
	if err := waitFor(readyTimeout, func() error {
		return infoField(ss.Replica.Addr, "replication", "master_link_status", "up")
	}); err != nil {
		t.Fatalf("redistest: replica not in sync: %v", err)
	}
	for i := range sentinelCount {
		ss.Addrs = append(ss.Addrs, ss.startSentinel(t, i, port))
	}
	for _, addr := range ss.Addrs {
		if err := waitFor(readyTimeout, func() error {
			return infoField(addr, "sentinel", "master0", "status=ok")
		}); err != nil {
			t.Fatalf("redistest: sentinel %s not watching: %v", addr, err)
		}
		if err := waitFor(readyTimeout, func() error {
			reply, err := command(addr, time.Second, "SENTINEL", "REPLICAS", ss.MasterName)
			if err == nil && !strings.Contains(reply, ss.Replica.Addr[strings.LastIndex(ss.Replica.Addr, ":")+1:]) {
				err = fmt.Errorf("replica not known yet: %q", reply)
			}
			return err
		}); err != nil {
			t.Fatalf("redistest: sentinel %s: %v", addr, err)
		}
	}
	return ss
}

// startSentinel starts Sentinel i watching the master on port, and returns
// its address. Sentinel rewrites its configuration file, so each gets its
// own in a folder of its own.
func (ss *SentinelSet) startSentinel(t testing.TB, i int, masterPort string) string {
	t.Helper()
	dir := t.TempDir()
	port, err := pickFreePort()
	if err != nil {
		t.Fatalf("redistest: no free port: %v", err)
	}
	conf := fmt.Sprintf(`port %d
bind 127.0.0.1
daemonize no
dir %s
sentinel monitor %s 127.0.0.1 %s 2
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s %d
`, port, dir, ss.MasterName, masterPort, ss.MasterName, SentinelDownAfter.Milliseconds(), ss.MasterName, sentinelFailover.Milliseconds())
	confPath := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "sentinel.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command("redis-sentinel", confPath)
	cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.SysProcAttr = dir, logFile, logFile, sysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("redistest: start sentinel %d: %v", i, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(stopTimeout):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	ss.sentinels = append(ss.sentinels, cmd)
	return "127.0.0.1:" + strconv.Itoa(port)
}

// MasterAddr returns the master's address as the first Sentinel that
// answers reports it.
func (ss *SentinelSet) MasterAddr() (string, error) {
	var lastErr error
	for _, addr := range ss.Addrs {
		reply, err := command(addr, time.Second, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", ss.MasterName)
		if err != nil {
			lastErr = err
			continue
		}
		host, port, ok := strings.Cut(reply, "\n")
		if !ok {
			return "", fmt.Errorf("sentinel %s: reply %q", addr, reply)
		}
		return net.JoinHostPort(host, port), nil
	}
	return "", lastErr
}

// WaitFailover waits until the Sentinels report a master other than the
// one started, and that master answers as one; it returns its address.
func (ss *SentinelSet) WaitFailover() string {
	ss.t.Helper()
	var master string
	err := waitFor(failoverTimeout, func() error {
		addr, err := ss.MasterAddr()
		switch {
		case err != nil:
			return err
		case addr == ss.Master.Addr:
			return fmt.Errorf("the master is still %s", addr)
		}
		master = addr
		return infoField(addr, "replication", "role", "master")
	})
	if err != nil {
		ss.t.Fatalf("redistest: no failover within %s: %v", failoverTimeout, err)
	}
	return master
}

// waitFor calls check every 50 ms until it returns nil or timeout passes,
// and returns its last error then.
func waitFor(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// infoField checks that field of INFO section on addr holds value.
func infoField(addr, section, field, value string) error {
	info, err := command(addr, time.Second, "INFO", section)
	if err != nil {
		return err
	}
	got := parseInfo(info)[field]
	if !strings.Contains(got, value) {
		return fmt.Errorf("%s: %s is %q, want %q", addr, field, got, value)
	}
	return nil
}
