package scripts

import "fmt"

// Lease returns the script that grants and takes back leases of a limit of
// one of the algorithms, named as OneRequest's is, whose rate, period,
// burst and unit are written into it (see lease.lua for its keys,
// arguments and answers): the fixed window and the sliding window
// counter, of unit 1, and both buckets. It returns "" for any other
// algorithm, or a sliding window counter of another unit.
func Lease(algorithm string, rate, period, burst, unit int64) string {
	kind := ""
	switch algorithm {
	case "fixed_window":
		kind = "fixed"
	case "sliding_window_counter":
		kind = "sliding"
	case "token_bucket", "leaky_bucket":
		kind = "bucket"
	}
	if kind == "" || kind == "sliding" && unit != 1 {
		return ""
	}
	return baked(algorithm, rate, period, burst, unit) + fmt.Sprintf("local KIND = %q\n", kind) + mustRead("lease.lua")
}
