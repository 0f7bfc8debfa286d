// Package scripts assembles the Redis scripts that make rate-limit
// decisions, one per algorithm, from the Lua sources of the top-level lua
// folder (lua.Sources), embedded into the binary; the file names below
// are that folder's.
//
// Each script is units.lua (time units), then an algorithm file, which
// defines the local functions check(i, key, now, cost, rate, period,
// burst, unit), commit (the same arguments), refund(i, key, now, cost,
// since, rate, period, burst, unit) and overdraw (commit's arguments; nil
// for the fixed window and the sliding log), followed by driver.lua, which
// runs them for every limit of each request. One call decides one or more keys
// of one limiter: KEYS holds, key after key, the state of each limit;
// ARGV[1] lists, per key and separated by commas, the requests' costs,
// separated by spaces ("1" for one request), decided in that order at one
// instant ("p1" peeks: the answer of a request of cost 1, with nothing
// consumed; "d<max µs>:<cost>" reserves: a request that the bucket
// algorithms admit within that delay is admitted, and its answer's
// retry-after is the delay after which it proceeds; check then takes the
// delay as a ninth argument and returns the wait as a fifth value;
// "r3/2000" refunds up to 3 units consumed at least 2000 µs ago, answering
// as a peek of cost 0 after it; "c5" charges 5 units, never refused, each
// limit taking all it has left when that is less, answering as a peek of
// cost 0 after it; "o5" charges the same way but overdraws where the
// algorithm can, so that a charge far above the quota holds the next
// request back a whole period: a bucket goes into debt, down to one unit
// above minus the burst, and the sliding window counter fills its current
// window's count up to the rate); rate, period, burst and unit follow for
// each limit: the period is in units of unit microseconds (1 for most
// limits), rate and period reduced for the buckets when that keeps their
// numbers exact (see
// the algorithms package). The script returns, per request, five integers
// separated by spaces: allowed (1 or 0), the binding limit's index (from
// 1), remaining, retry-after in µs and reset-after in µs; the answers of
// one key's requests follow one another, separated by spaces too, and the
// keys' answers are separated by commas. A key whose part failed answers
// "E" and the error, unless it is the call's only key: the call then fails
// with the error.
//
// A call that decides names one key more, last, in the same slot, with one
// argument more, last: how many milliseconds to keep its reply under that
// key. A call that finds the key set has run before (its client sent it
// again after losing the reply) and returns the kept reply, deciding
// nothing; so a call counts once however often it is sent. Only a reply
// that consumed, charged or refunded something is kept.
//
// A refund that gave something back publishes, on "<prefix>:denials", the
// SHA-1 (hex) of the key's hash tag, so that every application instance
// forgets the denials it cached for the key; reset.lua does the same after
// deleting a key's state.
//
// One request of a plain cost on a limiter of one limit, the most common
// call, has a script of its own per limit (OneRequest), its arguments the
// cost and the call's id or reply lifetime, its answer the driver's, and
// Redis does less work for it: for a limit of unit 1 of the fixed window,
// the sliding window counter and both buckets, the algorithm's check and
// commit written out as statements (one_<name>.lua), which define no
// function on every call; for the others, units.lua, the algorithm file,
// the limit, then one.lua in place of the driver. The written-out scripts
// repeat their algorithm's arithmetic for that one case, and the
// differential tests of the Redis store hold them to the driver.
//
// The requests of plain costs of several keys, or several requests of
// one key, on a limiter of one limit, the commonest call under load, have
// a script of their own per limit too (Batch): batch.lua in place of the
// driver; its arguments are the costs and the reply's lifetime, its
// answer the driver's.
//
// Concurrency stands apart: a script of its own, without the driver, that
// takes a lease of a concurrency limit (see concurrency.lua).
package scripts

import (
	"fmt"

	"github.com/redlimit/redlimit/lua"
)

// The complete scripts, ready for EVAL.
var (
	FixedWindow          = assemble("fixed_window.lua")
	SlidingWindowLog     = assemble("sliding_window_log.lua")
	SlidingWindowCounter = assemble("sliding_window_counter.lua")
	TokenBucket          = assemble("token_bucket.lua")
	LeakyBucket          = assemble("leaky_bucket.lua")

	// Concurrency takes a lease of a concurrency limit: a sorted set of
	// leases scored by expiry.
	Concurrency = mustRead("concurrency.lua")

	// Debtors keeps the set of stores that owe a prefix's keys charges
	// after a fault (see debtors.lua).
	Debtors = mustRead("debtors.lua")

	// Reset deletes one key's state under every limit and announces it on
	// the store's channel (see reset.lua).
	Reset = mustRead("reset.lua")
)

// OneRequest returns the script that decides one request of a plain cost
// for a limit of one of the algorithms, named as its file is without
// ".lua" ("fixed_window", say), whose rate, period, burst and unit (as
// the driver takes them) are written into it: the algorithm without the
// driver, and no limit arguments to convert on every call. A limit of
// unit 1 of an algorithm with a one_<name>.lua has that script, written
// out in full; the others have units.lua, the algorithm's file and
// one.lua. Both start with one_start.lua and end with one_end.lua. It
// returns "" for a name that has no file.
func OneRequest(algorithm string, rate, period, burst, unit int64) string {
	if !isAlgorithm(algorithm) {
		return ""
	}
	if inline, err := lua.Sources.ReadFile("one_" + algorithm + ".lua"); err == nil && unit == 1 {
		return limitLine(rate, period, burst, unit) + mustRead("one_start.lua") + string(inline) + mustRead("one_end.lua")
	}
	return baked(algorithm, rate, period, burst, unit, "one_start.lua", "one.lua", "one_end.lua")
}

// Batch returns the script that decides the requests of plain costs of
// one or more keys for a limit as OneRequest's is given, the limit written
// into it: the driver's arguments but the limit's, and its answer (see
// batch.lua). It returns "" for a name that has no file.
func Batch(algorithm string, rate, period, burst, unit int64) string {
	return baked(algorithm, rate, period, burst, unit, "batch.lua")
}

// baked is units.lua, the algorithm's file, its limit (limitLine), then
// the files of main; "" for a name that is no algorithm's.
func baked(algorithm string, rate, period, burst, unit int64, main ...string) string {
	if !isAlgorithm(algorithm) {
		return ""
	}
	src := mustRead("units.lua") + "\n" + mustRead(algorithm+".lua") + "\n" + limitLine(rate, period, burst, unit)
	for _, name := range main {
		src += mustRead(name)
	}
	return src
}

// limitLine writes a limit into a script as the constants RATE, PERIOD,
// BURST and UNIT.
func limitLine(rate, period, burst, unit int64) string {
	return fmt.Sprintf("local RATE, PERIOD, BURST, UNIT = %d, %d, %d, %d\n", rate, period, burst, unit)
}

// isAlgorithm reports whether name is an algorithm's, as its file is
// named without ".lua".
func isAlgorithm(name string) bool {
	switch name {
	case "fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket", "leaky_bucket":
		return true
	}
	return false
}

func assemble(name string) string {
	return mustRead("units.lua") + "\n" + mustRead(name) + "\n" + mustRead("driver.lua")
}

func mustRead(name string) string {
	b, err := lua.Sources.ReadFile(name)
	if err != nil {
		// The files are embedded at build time; a missing one is a build defect.
		panic("scripts: missing embedded script lua/" + name)
	}
	return string(b)
}
