package lua

import (
	"strings"
	"testing"
)

// The concurrency script stands alone (no driver), reads Redis's clock once
// and touches only the key it is given.
func TestConcurrencyScript(t *testing.T) {
	if strings.Contains(Concurrency, mustRead("driver.lua")) {
		t.Error("the concurrency script must not include the driver")
	}
	if n := strings.Count(Concurrency, "redis.call('TIME')"); n != 1 {
		t.Errorf("reads the clock %d times, want once", n)
	}
	if strings.Contains(Concurrency, "KEYS[2]") {
		t.Error("touches a key beyond KEYS[1]")
	}
	for _, cmd := range []string{"ZREMRANGEBYSCORE", "ZCARD", "ZSCORE", "ZADD", "PEXPIRE"} {
		if !strings.Contains(Concurrency, "'"+cmd+"'") {
			t.Errorf("no %s", cmd)
		}
	}
}
