package scripts

import (
	"strings"
	"testing"
)

// The httprate counter's scripts stand alone (no driver); the checked one
// reads Redis's clock once, and each renews the expiry of what it writes.
func TestHTTPRateScripts(t *testing.T) {
	cases := []struct {
		name  string
		src   string
		clock int
	}{
		{"increment", HTTPRateIncrement, 0},
		{"admit", HTTPRateAdmit, 1},
	}
	driver := mustRead("driver.lua")
	for _, tc := range cases {
		if strings.Contains(tc.src, driver) {
			t.Errorf("%s: carries the algorithms' driver", tc.name)
		}
		if n := strings.Count(tc.src, "redis.call('TIME')"); n != tc.clock {
			t.Errorf("%s: reads the clock %d times; want %d", tc.name, n, tc.clock)
		}
		if strings.Count(tc.src, "'INCRBY'") != 1 || strings.Count(tc.src, "'PEXPIRE'") != 1 {
			t.Errorf("%s: want one INCRBY and one PEXPIRE", tc.name)
		}
	}
}
