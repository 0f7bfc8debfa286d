package lua

import (
	"strings"
	"testing"
)

// Every script is the time units' helpers, its algorithm's check and
// commit, and the driver that calls them, and takes its time from the
// Redis server only.
func TestScriptsAreAssembled(t *testing.T) {
	scripts := map[string]string{
		"fixed window": FixedWindow, "sliding window log": SlidingWindowLog,
		"sliding window counter": SlidingWindowCounter, "token bucket": TokenBucket, "leaky bucket": LeakyBucket,
	}
	driver, units := mustRead("driver.lua"), mustRead("units.lua")
	for name, src := range scripts {
		if !strings.HasPrefix(src, units) {
			t.Errorf("%s: does not start with the units' helpers", name)
		}
		if !strings.HasSuffix(src, driver) {
			t.Errorf("%s: does not end with the driver", name)
		}
		body := strings.TrimSuffix(src, driver)
		for _, want := range []string{"local function check(", "local function commit("} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: no %q", name, want)
			}
		}
		if strings.Contains(body, "TIME") || strings.Count(src, "redis.call('TIME')") != 1 {
			t.Errorf("%s: must read the clock once, in the driver", name)
		}
	}
}
