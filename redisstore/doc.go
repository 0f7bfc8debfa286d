// Package redisstore is the Redis algorithms.Store: each decision is one
// Lua script call, atomic on a single server or a Cluster, shared by every
// instance. While Redis cannot decide, a memory store of this instance's
// share decides (FailLocal, the default), and what it admits is charged to
// Redis afterwards.
//
// # Inside
//
// A request walks decide.go (the breaker, the deadline, the failure mode),
// batcher.go and flush.go (same-key requests wait for one call; a flush
// sends the ready keys in one pipeline; a key alone is a call of its
// own), call_layout.go (where every call's script, keys and arguments
// are laid out: a rate limit's, a lease's, the debtors'), calls.go and send.go (where calls leave for
// Redis, the lost script sent again), args.go (a reply read), once.go (a
// call counted once however often go-redis sends it) and migrate.go
// (Cluster slots on the move). Peek, Reset, Reserve, Charge, Refund and
// concurrency leases meet the breaker, the deadline and the observer in
// single_call.go. Each
// mechanism states its invariant and capacity in its doc comment and
// names the test that proves it: deadline.go, dial_watch.go and
// dial_hook.go (refused dials), breaker_log.go, denials.go and
// denials_sync.go (the denial cache), last_said.go (where the twin
// starts), ledger.go, owed_charges.go, gate.go, settler.go,
// settle_groups.go and call_groups.go (what a fault leaves owed),
// eviction_policy.go and eviction_watch.go, concurrency.go and
// concurrency_releases.go (concurrency leases), version.go. crew.go
// counts the goroutines the store starts, and close.go stops them and
// sends what is owed (Store.Close). Under WithLeases: lease_option.go
// (what is leased), lease_limiter.go (a decision from a lease, or the
// exact way) and lease_limits.go (several limits), lease_table.go (leases
// per key and where a key turns busy) and lease_worker.go (grants and
// returns).
//
// # Glossary
//
//   - twin: the memory limiter of this instance's share of each limit,
//     which decides while Redis cannot.
//   - share: a limit divided by WithInstances, what one twin may admit.
//   - said (last said): Redis's last answers for a key, which the twin
//     starts from.
//   - owed, charge: what the twin admitted, to be counted in Redis.
//   - doubt: an owed charge whose call may or may not have counted it.
//   - kept reply: the reply Redis keeps under a call's id, so that a call
//     sent again answers from it rather than decide again.
//   - group: a key's part in a call that decides or charges several keys.
//   - gate: after a fault, a key's Redis admissions pass only if the twin
//     admits them too, until every store's charges for it have landed.
//   - debtors: the stores of a prefix that owe charges, a sorted set in
//     Redis.
//   - settler: the goroutine that sends what a store owes.
//   - line: the requests of one key waiting for its call; also the
//     release line of concurrency leases.
//   - lease: units of a key's current window that Redis granted this
//     instance under WithLeases, spent in memory; grant, return: the
//     lease script's two operations, each counted once by lease id.
//   - holder: an instance with a live lease of a key.
//   - guard: the breaker, deadlines and failure mode around every call.
//   - moving: a Cluster slot being migrated (ASK, TRYAGAIN).
//   - crew: the goroutines a store started, which Close stops and awaits.
package redisstore
