// Package faults holds no code: its tests put the Redis store under real
// faults (a killed and restarted server, CLIENT PAUSE, SCRIPT FLUSH, OOM
// errors, a server that never answers, a Sentinel failover, a Cluster
// master lost) with real redis-server processes, and check what a demanding
// user counts on: every decision within its deadline plus 50 ms, never more
// admitted than the limit (plus the documented local quota while Redis
// cannot decide), and decisions back in Redis soon after it returns. They
// run in make test, with a default go-redis client and with the
// recommended one.
package faults
