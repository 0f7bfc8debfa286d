package lua

import "fmt"

// Lease returns the script that grants and takes back leases of a limit of
// the fixed window or the sliding window counter, named as OneRequest's
// algorithm is, whose rate, period, burst and unit are written into it
// (see lease.lua for its keys, arguments and answers). The unit must be 1.
// It returns "" for any other algorithm or unit.
func Lease(algorithm string, rate, period, burst, unit int64) string {
	if algorithm != "fixed_window" && algorithm != "sliding_window_counter" || unit != 1 {
		return ""
	}
	return baked(algorithm, rate, period, burst, unit) + fmt.Sprintf("local FIXED = %t\n", algorithm == "fixed_window") + mustRead("lease.lua")
}
