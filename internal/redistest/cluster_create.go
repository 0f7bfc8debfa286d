package redistest

import (
	"fmt"
	"net"
	"strconv"
	"time"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// createCluster makes the nodes at addrs one cluster, by the commands
// redis-cli --cluster create sends but without its pauses: the first
// masters nodes take the slots in equal ranges (CLUSTER ADDSLOTSRANGE),
// each with a config epoch of its own so that no epoch collision needs
// resolving, every node meets the first, and each node after the masters
// replicates one of them in turn once it knows it. It returns once the
// commands are accepted; waitClusterReady then waits for the nodes to
// agree.
func createCluster(addrs []string, masters int) error {
	ids := make([]string, len(addrs))
	for i, addr := range addrs {
		id, err := command(addr, time.Second, "CLUSTER", "MYID")
		if err != nil {
			return fmt.Errorf("%s: CLUSTER MYID: %w", addr, err)
		}
		ids[i] = id
	}
	for i := range masters {
		first, last := i*clusterSlots/masters, (i+1)*clusterSlots/masters-1
		if _, err := command(addrs[i], time.Second, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(first), strconv.Itoa(last)); err != nil {
			return fmt.Errorf("%s: CLUSTER ADDSLOTSRANGE %d %d: %w", addrs[i], first, last, err)
		}
		if _, err := command(addrs[i], time.Second, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			return fmt.Errorf("%s: CLUSTER SET-CONFIG-EPOCH: %w", addrs[i], err)
		}
	}
	for _, addr := range addrs[1:] {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return err
		}
		if _, err := command(addrs[0], time.Second, "CLUSTER", "MEET", host, port); err != nil {
			return fmt.Errorf("%s: CLUSTER MEET %s: %w", addrs[0], addr, err)
		}
	}
	for i := masters; i < len(addrs); i++ {
		master := ids[(i-masters)%masters]
		// A node replicates only a master it knows: it learns of it by
		// gossip, within a few heartbeats of the MEET.
		if err := waitFor(clusterReadyTimeout, func() error {
			_, err := command(addrs[i], time.Second, "CLUSTER", "REPLICATE", master)
			return err
		}); err != nil {
			return fmt.Errorf("%s: CLUSTER REPLICATE %s: %w", addrs[i], master, err)
		}
	}
	return nil
}
