package config

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// boundFiles has, for every integer field of the table, a file whose %s is
// that field's value, and the field's path in error messages.
var boundFiles = map[string]struct{ file, path string }{
	"rate":         {minimal("    algorithm: fixed_window\n    limits: [{rate: %s, period: 1h}]\n"), "policies.p.limits[0].rate"},
	"burst":        {minimal("    algorithm: token_bucket\n    limits: [{rate: 1, period: 1s, burst: %s}]\n"), "policies.p.limits[0].burst"},
	"cost":         {minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n    cost: %s\n"), "policies.p.cost"},
	"ipv6_prefix":  {strings.Replace(minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"), "key: ip", "key: {kind: ip, ipv6_prefix: %s}", 1), "policies.p.key.ipv6_prefix"},
	"pool_size":    {"redis:\n  url: redis://a:6379\n  pool_size: %s\n" + okPolicy, "redis.pool_size"},
	"instances":    {"redis:\n  url: redis://a:6379\n  instances: %s\n" + okPolicy, "redis.instances"},
	"denial_cache": {"redis:\n  url: redis://a:6379\n  denial_cache: %s\n" + okPolicy, "redis.denial_cache"},
	"max_keys":     {"memory:\n  max_keys: %s\n" + okPolicy, "memory.max_keys"},
	"db":           {"redis:\n  addr: a:6379\n  db: %s\n" + okPolicy, "redis.db"},
}

var okPolicy = minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n")

// rangeIn matches every range a message states, in either of the forms
// the package and the algorithms have used.
var rangeIn = regexp.MustCompile(`(-?\d+)(?:\.\.| to )(\d+)`)

// Every integer field reports one range, the table's, for every value it
// refuses: just outside either end, far outside, and beyond int64. (A rate
// of 2e9 used to be refused with 1 to 1000000000, one of 5e9 with
// 1..2147483647.)
func TestBoundsOneRangePerField(t *testing.T) {
	names := make([]string, 0, len(bounds))
	for name := range bounds {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		b := bounds[name]
		f, ok := boundFiles[name]
		if !ok {
			t.Errorf("%s: no test file for the field", name)
			continue
		}
		values := []string{strconv.Itoa(b.min - 1), strconv.Itoa(b.max + 1), "2000000000", "5000000000", "99999999999999999999"}
		for _, v := range values {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= int64(b.min) && n <= int64(b.max) {
				continue // inside the range
			}
			t.Run(name+"="+v, func(t *testing.T) {
				_, err := Parse([]byte(fmt.Sprintf(f.file, v)), "t.yaml")
				if err == nil {
					t.Fatalf("%s: %s accepted", name, v)
				}
				want := fmt.Sprintf("%s: %s is outside %d..%d", f.path, v, b.min, b.max)
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error\n%v\nlacks %q", err, want)
				}
				for _, m := range rangeIn.FindAllStringSubmatch(err.Error(), -1) {
					if m[1] != strconv.Itoa(b.min) || m[2] != strconv.Itoa(b.max) {
						t.Errorf("error\n%v\nstates another range, %s", err, m[0])
					}
				}
			})
		}
		for _, v := range []int{b.min, b.max} {
			if name == "cost" || name == "burst" && v > 1 {
				continue // bounded further by the limits' quota
			}
			if _, err := Parse([]byte(fmt.Sprintf(f.file, strconv.Itoa(v))), "t.yaml"); err != nil && strings.Contains(err.Error(), f.path) {
				t.Errorf("%s: %d refused: %v", name, v, err)
			}
		}
	}
}
