package ratemath

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// CheckKey validates a key as Allow does.
func CheckKey(key string) error {
	if key == "" || len(key) > algorithms.MaxKeyLength {
		return fmt.Errorf("%w: length %d, want 1 to %d bytes", algorithms.ErrInvalidKey, len(key), algorithms.MaxKeyLength)
	}
	return nil
}

// Lease ids: a random prefix per process and a counter, so that leases of
// different instances never collide in one Redis set.
var (
	LeaseSeq    atomic.Uint64
	leasePrefix = newLeasePrefix()
)

func newLeasePrefix() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on supported platforms; a fixed prefix
		// would only risk collisions with other instances, so fall back to
		// the time.
		return strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	}
	return hex.EncodeToString(b[:]) + "-"
}

// Member is a lease's name in Redis.
func Member(id uint64) string { return leasePrefix + strconv.FormatUint(id, 36) }

// HoldStats keeps an exponentially weighted mean of how long leases were
// held, the estimate of a denied Lease's RetryAfter.
type HoldStats struct {
	Fixed time.Duration // WithConcurrencyRetryAfter; 0: observed
	mean  atomic.Int64  // ns; 0 before the first release
}

// ShareOfLimit is one instance's share of limit, at least 1.
func ShareOfLimit(limit, instances int) int {
	if instances <= 1 {
		return limit
	}
	return max(1, limit/instances)
}

// Observe adds one hold time, weighing it 1/8.
func (h *HoldStats) Observe(d time.Duration) {
	d = max(d, time.Microsecond)
	for {
		old := h.mean.Load()
		next := int64(d)
		if old != 0 {
			next = old + (int64(d)-old)/8
		}
		if h.mean.CompareAndSwap(old, max(next, 1)) {
			return
		}
	}
}

// RetryAfter estimates when a slot frees, at most untilFirst (the time
// until the earliest held lease expires) and at least a millisecond.
func (h *HoldStats) RetryAfter(untilFirst time.Duration) time.Duration {
	d := h.Fixed
	if d == 0 {
		d = time.Duration(h.mean.Load())
		if d == 0 {
			d = algorithms.DefaultConcurrencyRetryAfter
		}
	}
	if untilFirst > 0 {
		d = min(d, untilFirst)
	}
	return max(d, time.Millisecond)
}
