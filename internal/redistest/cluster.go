package redistest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	// clusterNodes is the size of the test cluster: three masters, the
	// smallest cluster redis-cli agrees to create, and enough for keys of a
	// test to land on different nodes.
	clusterNodes = 3
	// clusterPortMin and clusterPortMax bound the client ports of cluster
	// nodes. Each node also listens on its port+10000 for the cluster bus,
	// so ports must stay below 55536.
	clusterPortMin = 30000
	clusterPortMax = 54999
	// clusterReadyTimeout bounds the wait for every node to report the
	// cluster healthy after creation.
	clusterReadyTimeout = 30 * time.Second
)

// Cluster starts a three-master Redis Cluster on free loopback ports and
// returns the nodes' "127.0.0.1:port" addresses. It returns only once every
// node reports cluster_state:ok with all 16384 slots assigned and knows all
// three nodes, so a cluster client can be pointed at any address and used at
// once. The nodes are stopped when the
// test ends; Stop(t, addr) stops one early. It needs redis-server, and
// skips or fails as Require does.
func Cluster(t testing.TB) []string {
	t.Helper()
	nodes := StartCluster(t)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// StartCluster is Cluster returning the nodes' handles, for tests that stop
// a node mid-test with Server.Stop.
func StartCluster(t testing.TB) []*Server {
	t.Helper()
	return startCluster(t, clusterNodes, 0, nil)
}

// startCluster starts masters masters with replicas replicas each, the
// nodes configured with extra, and waits until every node sees a healthy
// cluster.
func startCluster(t testing.TB, masters, replicas int, extra []string) []*Server {
	t.Helper()
	requireBinaries(t, "redis-server")

	began := time.Now()
	n := masters * (1 + replicas)
	nodes := make([]*Server, n)
	addrs := make([]string, n)
	for i := range nodes {
		// Each node gets its own temporary folder, so each keeps its own
		// nodes.conf.
		nodes[i] = start(t, pickClusterPort, append([]string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
		}, extra...))
		addrs[i] = nodes[i].Addr
	}

	started := time.Now()
	if err := createCluster(addrs, masters); err != nil {
		t.Fatalf("redistest: creating the cluster: %v%s", err, nodeLogs(nodes))
	}

	created := time.Now()
	if err := waitClusterReady(addrs, masters); err != nil {
		t.Fatalf("redistest: cluster not ready: %v%s", err, nodeLogs(nodes))
	}
	// The phases' times show where a slow start went, on a loaded machine.
	t.Logf("redistest: cluster %v ready in %v (nodes up %v, commands %v, settling %v)",
		addrs, time.Since(began).Round(time.Millisecond), started.Sub(began).Round(time.Millisecond),
		created.Sub(started).Round(time.Millisecond), time.Since(created).Round(time.Millisecond))
	return nodes
}

// waitClusterReady polls CLUSTER INFO on every node until all of them see a
// healthy cluster of all the nodes, or clusterReadyTimeout passes. Checking
// each node matters: the configuration spreads by gossip, and a node can
// still report cluster_state:fail for a moment after.
func waitClusterReady(addrs []string, masters int) error {
	deadline := time.Now().Add(clusterReadyTimeout)
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_assigned": "16384",
		"cluster_slots_ok":       "16384",
		"cluster_known_nodes":    strconv.Itoa(len(addrs)),
		"cluster_size":           strconv.Itoa(masters),
	}
	for {
		problem := clusterProblem(addrs, want)
		if problem == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %s", clusterReadyTimeout, problem)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clusterProblem returns the first way a node's CLUSTER INFO differs from
// want, or "" when every node matches.
func clusterProblem(addrs []string, want map[string]string) string {
	for _, addr := range addrs {
		info, err := command(addr, time.Second, "CLUSTER", "INFO")
		if err != nil {
			return fmt.Sprintf("%s: CLUSTER INFO: %v", addr, err)
		}
		fields := parseInfo(info)
		for k, v := range want {
			if fields[k] != v {
				return fmt.Sprintf("%s: %s is %q, want %q", addr, k, fields[k], v)
			}
		}
	}
	return ""
}

// parseInfo splits an INFO-style reply ("key:value" lines) into a map.
func parseInfo(info string) map[string]string {
	fields := make(map[string]string)
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok {
			fields[k] = v
		}
	}
	return fields
}

// pickClusterPort picks a random port in the cluster range whose bus port
// (port+10000) is free too. The kernel cannot be asked for such a pair, so
// candidates are drawn at random, which also keeps parallel test binaries
// from all trying the same ports.
func pickClusterPort() (int, error) {
	for range 100 {
		port := clusterPortMin + rand.IntN(clusterPortMax-clusterPortMin+1)
		if portFree(port) && portFree(port+10000) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free pair of ports port and port+10000 in %d-%d", clusterPortMin, clusterPortMax)
}

// portFree reports whether a loopback port can be bound at this moment.
func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	return l.Close() == nil
}

// nodeLogs formats the logs of all nodes for a failure message.
func nodeLogs(nodes []*Server) string {
	var b strings.Builder
	for _, n := range nodes {
		fmt.Fprintf(&b, "\n--- log of %s ---\n%s", n.Addr, n.Log())
	}
	return b.String()
}
