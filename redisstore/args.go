package redisstore

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// A script call's keys, arguments and reply, as the Go side writes and
// reads them.

// parse reads the script's reply for n requests into dst, or a new slice
// when dst is too short (a job's buffer spares one allocation per key).
func (l *redisLimiter) parse(reply string, n int, dst []algorithms.Result) ([]algorithms.Result, error) {
	var small [20]int64 // a reply of up to 4 requests, off the heap
	var f []int64
	if 5*n <= len(small) {
		f = small[:5*n]
	} else {
		f = make([]int64, 5*n)
	}
	if !parseReply(reply, f) {
		return nil, fmt.Errorf("%w: %q", ErrUnexpectedReply, reply)
	}
	res := dst[:0]
	if cap(res) < n {
		res = make([]algorithms.Result, n)
	}
	res = res[:n]
	for i := range res {
		v := f[5*i : 5*i+5]
		if v[1] < 1 || v[1] > int64(len(l.limits)) {
			return nil, fmt.Errorf("%w: %q", ErrUnexpectedReply, reply)
		}
		res[i] = ratemath.MakeResult(l.alg, l.limits, int(v[1]-1), v[0] == 1, v[2], v[3], v[4])
	}
	return res, nil
}

// costList is the script's list of costs: "1" for the common single request
// of cost 1, without an allocation.
func costList(costs []int) string {
	if len(costs) == 1 && costs[0] == 1 {
		return "1"
	}
	b := make([]byte, 0, 4*len(costs))
	for i, c := range costs {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, int64(c), 10)
	}
	return string(b)
}

// oneCost is the list of one request of cost 1 as a script argument.
var oneCost any = "1"

// costArg is list as a script argument: the common list of one request of
// cost 1 without an allocation.
func costArg(list string) any {
	if list == "1" {
		return oneCost
	}
	return list
}

// hashTagSafe escapes '{', '}' and '%' in key, so that the whole key, and
// not a piece of it up to a '}', is the Cluster hash tag: keys such as
// "route:/users/{id}|ip:192.0.2.1" would otherwise put every client of a
// route in one slot. Escaping '%' too keeps distinct keys distinct.
func hashTagSafe(key string) string {
	for i := 0; i < len(key); i++ { // faster than strings.ContainsAny for a key's length
		if c := key[i]; c == '{' || c == '}' || c == '%' {
			return tagEscaper.Replace(key)
		}
	}
	return key
}

var tagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// parseReply reads len(f) non-negative integers separated by single spaces.
func parseReply(s string, f []int64) bool {
	i := 0
	for n := range f {
		start := i
		var v int64
		for i < len(s) && s[i] >= '0' && s[i] <= '9' && i-start < 18 {
			v = v*10 + int64(s[i]-'0')
			i++
		}
		if i == start {
			return false
		}
		f[n] = v
		if n < len(f)-1 {
			if i >= len(s) || s[i] != ' ' {
				return false
			}
			i++
		}
	}
	return i == len(s)
}
