package scripts

import (
	"strings"
	"testing"
)

// The concurrency script stands alone (no driver), reads Redis's clock once
// and touches only the keys it is given: the lease set and the new lease's
// tombstone.
func TestConcurrencyScript(t *testing.T) {
	if strings.Contains(Concurrency, mustRead("driver.lua")) {
		t.Error("the concurrency script must not include the driver")
	}
	if n := strings.Count(Concurrency, "redis.call('TIME')"); n != 1 {
		t.Errorf("reads the clock %d times, want once", n)
	}
	if strings.Contains(Concurrency, "KEYS[3]") || !strings.Contains(Concurrency, "KEYS[2]") {
		t.Error("touches a key beyond KEYS[2], or no tombstone")
	}
	for _, cmd := range []string{"ZREMRANGEBYSCORE", "ZCARD", "ZSCORE", "ZADD", "PEXPIRE", "EXISTS"} {
		if !strings.Contains(Concurrency, "'"+cmd+"'") {
			t.Errorf("no %s", cmd)
		}
	}
}
