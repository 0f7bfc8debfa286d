package redisstore

import (
	"sync/atomic"
	"time"
)

// ledger is what a Redis store owes Redis after a fault, and the gates it
// holds: the fault path's memory beside the twin (lastSaid) and the denial
// cache (denials). Its fields are guarded by the batcher's mu, which it is
// embedded in: the twin's decision and the debt it creates change in one
// critical section (admitLocally), and a key's owed charge is taken with
// the key's waiters (take), so that Redis counts it before it decides
// them.
//
// Invariants: every local admission is charged to Redis exactly once
// (owed_charges.go); a key that decided locally is held to its twin
// until every store's charges can have landed (gate.go); owed keys
// settle at Redis's speed (settler.go); the doubts of grouped calls are
// asked of Redis (call_groups.go).
//
// Capacity: maxOwed keys owe (maxOwedKeys, about 100 bytes each),
// and as many are gated, whatever the number of keys clients send; a key
// with no room is decided by its twin from forgottenAllowance, owing
// nothing, and is not gated: a tighter limit for that key, never a looser
// one, and never a refusal of the others.
//
// Proved by TestLocalAdmissionsAreCharged, TestChargesAcrossInstances,
// TestFullChargeTableServesOthers, TestGateWaitsForOtherDebtors,
// TestGroupedCallsAreCharged and, at scale, TestScaleSettleAtRedisSpeed
// and TestScaleOneClientManyIdentities.
type ledger struct {
	owed    map[queueKey]*owedCharge
	maxOwed int
	// gates: keys whose Redis admissions the twin must confirm, until when
	// (zero: while owed); gated is len(gates), read without the lock.
	gates map[queueKey]time.Time
	gated atomic.Int32

	retrying bool // the settler runs (settler.go)
	// answered wakes a settler that waits after a failed round: a flush
	// Redis answered says it is back (capacity 1: one wake is enough).
	answered chan struct{}
	closed   bool     // the store is closed: nothing more is sent
	debtors  *debtors // the prefix's stores that owe; nil: not followed
}

func newLedger() ledger {
	return ledger{owed: map[queueKey]*owedCharge{}, maxOwed: maxOwedKeys, gates: map[queueKey]time.Time{},
		answered: make(chan struct{}, 1)}
}
