package redistest

import (
	"fmt"
	"testing"
	"time"
)

// clusterNodeTimeout is the node timeout of a cluster with replicas: a
// master that has not answered for this long is failed over.
const clusterNodeTimeout = time.Second

// ClusterSet is a Redis Cluster of three masters with one replica each.
type ClusterSet struct {
	// Addrs are every node's address, for go-redis's ClusterClient.
	Addrs []string
	// Masters and Replicas are the nodes by their role after creation.
	Masters, Replicas []*Server
}

// StartClusterWithReplicas starts three masters and three replicas, with a
// node timeout of one second so that a failover takes seconds, and returns
// once every node sees a healthy cluster. It needs redis-server, and
// skips or fails as Require does.
func StartClusterWithReplicas(t testing.TB) *ClusterSet {
	t.Helper()
	nodes := startCluster(t, clusterNodes, 1, []string{
		"--cluster-node-timeout", fmt.Sprint(clusterNodeTimeout.Milliseconds()),
		// A replica fails over however long its link has been down: the
		// test decides when to kill, not how fresh the replica must be.
		"--cluster-replica-validity-factor", "0",
	})
	cs := &ClusterSet{}
	for _, n := range nodes {
		cs.Addrs = append(cs.Addrs, n.Addr)
		// A replica may still be syncing: its role is set all the same.
		if infoField(n.Addr, "replication", "role", "master") == nil {
			cs.Masters = append(cs.Masters, n)
		} else {
			cs.Replicas = append(cs.Replicas, n)
		}
	}
	if len(cs.Masters) != clusterNodes {
		t.Fatalf("redistest: %d masters after creation, want %d", len(cs.Masters), clusterNodes)
	}
	for _, r := range cs.Replicas {
		if err := waitFor(readyTimeout, func() error {
			return infoField(r.Addr, "replication", "master_link_status", "up")
		}); err != nil {
			t.Fatalf("redistest: replica not in sync: %v", err)
		}
	}
	return cs
}

// WaitFailover waits until a replica has taken over from the master that
// was stopped, and every node still running sees a healthy cluster with
// all slots served.
func (cs *ClusterSet) WaitFailover(t testing.TB, stopped *Server) {
	t.Helper()
	var alive []string
	for _, addr := range cs.Addrs {
		if addr != stopped.Addr {
			alive = append(alive, addr)
		}
	}
	want := map[string]string{"cluster_state": "ok", "cluster_slots_ok": "16384", "cluster_slots_pfail": "0", "cluster_slots_fail": "0"}
	err := waitFor(failoverTimeout, func() error {
		promoted := 0
		for _, r := range cs.Replicas {
			if infoField(r.Addr, "replication", "role", "master") == nil {
				promoted++
			}
		}
		if promoted == 0 {
			return fmt.Errorf("no replica promoted yet")
		}
		if p := clusterProblem(alive, want); p != "" {
			return fmt.Errorf("%s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("redistest: no cluster failover within %s: %v%s", failoverTimeout, err, nodeLogs(append(cs.Masters, cs.Replicas...)))
	}
}
