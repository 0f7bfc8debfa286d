package memstore

import (
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
)

// The conformance suite (package storetest) on the memory store: with its
// clock set, and in real time.

func TestConformanceClocked(t *testing.T) {
	storetest.RunClocked(t, func(t *testing.T) (algorithms.Store, func(time.Duration)) {
		var mu sync.Mutex
		now := start
		store := must(New(WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })))
		return store, func(at time.Duration) { mu.Lock(); now = start.Add(at); mu.Unlock() }
	})
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) algorithms.Store { return must(New()) })
}
