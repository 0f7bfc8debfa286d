package scripts

import (
	"fmt"
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

// A one-request script starts with one_start.lua and ends with
// one_end.lua, reading the clock once: for a limit of unit 1 of an
// algorithm written out in full, its one_<name>.lua after the limit and
// no function defined; otherwise the units' helpers, the algorithm, its
// limit and one.lua. A name that is no algorithm's gets none.
func TestOneRequestAssembled(t *testing.T) {
	start, end := mustRead("one_start.lua"), mustRead("one_end.lua")
	inline := map[string]bool{"fixed_window": true, "sliding_window_counter": true, "token_bucket": true, "leaky_bucket": true}
	for _, alg := range []string{"fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket", "leaky_bucket"} {
		for _, unit := range []int64{1, 1000} {
			src := OneRequest(alg, 10, 60000000, 10, unit)
			limit := fmt.Sprintf("local RATE, PERIOD, BURST, UNIT = 10, 60000000, 10, %d\n", unit)
			var want string
			if inline[alg] && unit == 1 {
				want = limit + start + mustRead("one_"+alg+".lua") + end
				if strings.Contains(src, "local function") || strings.Contains(src, "function(") {
					t.Errorf("%s, unit %d: defines a function", alg, unit)
				}
			} else {
				want = mustRead("units.lua") + "\n" + mustRead(alg+".lua") + "\n" + limit + start + mustRead("one.lua") + end
			}
			if src != want {
				t.Errorf("%s, unit %d: not assembled as documented", alg, unit)
			}
			if strings.Count(src, "redis.call('TIME')") != 1 {
				t.Errorf("%s, unit %d: must read the clock once", alg, unit)
			}
		}
	}
	for _, name := range []string{"driver", "one", "one_start", "units", "concurrency", "reset", "nope"} {
		if got := OneRequest(name, 1, 1, 1, 1); got != "" {
			t.Errorf("OneRequest(%q) = a script of %d bytes, want none", name, len(got))
		}
	}
}

// A batch script is the units' helpers, the algorithm, its limit and
// batch.lua, reading the clock once; a name that is no algorithm's gets
// none.
func TestBatchAssembled(t *testing.T) {
	batch, units := mustRead("batch.lua"), mustRead("units.lua")
	for _, alg := range []string{"fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket", "leaky_bucket"} {
		src := Batch(alg, 10, 60000000, 10, 1)
		if !strings.HasPrefix(src, units) || !strings.HasSuffix(src, batch) {
			t.Errorf("%s: not units, algorithm, limit, batch.lua", alg)
		}
		if !strings.Contains(src, mustRead(alg+".lua")) || !strings.Contains(src, "local RATE, PERIOD, BURST, UNIT = 10, 60000000, 10, 1\n") {
			t.Errorf("%s: the algorithm or its limit is missing", alg)
		}
		if strings.Count(src, "redis.call('TIME')") != 1 {
			t.Errorf("%s: must read the clock once", alg)
		}
	}
	for _, name := range []string{"driver", "batch", "one", "units", "nope"} {
		if got := Batch(name, 1, 1, 1, 1); got != "" {
			t.Errorf("Batch(%q) = a script of %d bytes, want none", name, len(got))
		}
	}
}
