// Package lua holds the Lua scripts redlimit runs in Redis: one file per
// algorithm (fixed_window.lua, sliding_window_log.lua,
// sliding_window_counter.lua, token_bucket.lua, leaky_bucket.lua), the
// driver that runs an algorithm for every limit of a call (driver.lua),
// the scripts of one request and of a batch of one limit (one*.lua,
// batch.lua), leases (lease.lua), concurrency leases (concurrency.lua),
// resets (reset.lua), the stores that owe charges after a fault
// (debtors.lua) and the httprate counter (httprate_*.lua).
//
// The package exports the sources only, for reading and auditing; the
// Go code that assembles them into the scripts Redis runs, and the
// protocol of their keys, arguments and answers, are internal to
// redlimit.
package lua

import "embed"

// Sources are the Lua scripts redlimit runs in Redis, embedded as they are
// in this folder, for reading and auditing; its Go API, which assembles
// them into the scripts it sends, is internal.
//
//go:embed *.lua
var Sources embed.FS
