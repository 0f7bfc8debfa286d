package middleware

import (
	"net/http"
	"reflect"
	"strconv"
	"time"
	"unsafe"

	"github.com/redlimit/redlimit/algorithms"
)

// Canonical header names, as http.Header stores them, so the hot path can
// assign to the map directly.
const (
	hdrLimit        = "X-Ratelimit-Limit"
	hdrRemaining    = "X-Ratelimit-Remaining"
	hdrReset        = "X-Ratelimit-Reset"
	hdrPolicy       = "Ratelimit-Policy"
	hdrRateLimit    = "Ratelimit"
	hdrRetryAfter   = "Retry-After"
	hdrCacheControl = "Cache-Control"
	hdrContentType  = "Content-Type"
	hdrAuthenticate = "Www-Authenticate"
)

// headerText is the storage of one response's rate-limit header values:
// the slices the header map holds, and the values' bytes, most often (see
// setHeaders); and, for a denial, the values of the problem's Content-Type
// and Cache-Control (see problem.write). Once the response's fields are
// set it is never written again, so the values may share its bytes and
// outlive the request with the header map; and it belongs to one
// response, so a handler or an outer
// middleware that writes into its values in place changes no other
// response (TestHeaderBytes, TestProblemHeaderBytes).
type headerText struct {
	vals    [6]string
	text    [72]byte
	problem [2]string
}

// headerTextOf returns d's header storage, or new storage when there is no
// decision context to share an allocation with.
func headerTextOf(d *decision) *headerText {
	if d == nil {
		return new(headerText)
	}
	return &d.hdr
}

// setHeaders sets the rate-limit headers for res, and Retry-After when it
// is a denial. The values are cut from one string written in ht's text, or
// are ps's constants for the binding limit (X-RateLimit-Limit when its
// quota is the policy's, RateLimit-Policy), and the slices that hold them
// from ht's vals, so the headers cost no allocation of their own but for
// long policy names. X-RateLimit-Reset counts from rd's reading after the
// decision.
func (c *config) setHeaders(h http.Header, res algorithms.Result, ht *headerText, ps *policySet, rd *readings) {
	var v headerValues
	merge := len(h) > 0 // an outer limiter's fields may be there to extend
	b := ht.text[:0]

	limit := max(res.Limit, 0)
	remaining := int64(max(res.Remaining, 0))
	reset, t, retry := resetTimes(res)
	described := ps != nil && res.Index >= 0 && res.Index < len(ps.names)

	rs, re := 0, 0 // where legacy's remaining count is, for RateLimit's r
	if c.legacy {
		if described && ps.quotas[res.Index] == limit {
			v.constant(&ht.vals, hdrLimit, ps.limits[res.Index])
		} else {
			b = strconv.AppendInt(b, int64(limit), 10)
			v.cut(hdrLimit, len(b))
		}
		rs = len(b)
		b = strconv.AppendInt(b, remaining, 10)
		re = len(b)
		v.cut(hdrRemaining, re)
		if c.resetMode == ResetEpoch {
			// Never before the epoch, even on a clock that reads the zero
			// time.
			reset = max(ceilUnix(c.afterTime(rd).Add(max(res.ResetAfter, 0))), 0)
		}
		b = strconv.AppendInt(b, reset, 10)
		v.cut(hdrReset, len(b))
	}
	if c.ietf {
		name := c.sfName
		if described {
			// Every policy of the limiter, fixed when it was described; the
			// RateLimit item below names the one that binds.
			v.constant(&ht.vals, hdrPolicy, ps.header)
			name = ps.names[res.Index]
		} else {
			b = append(b, c.sfName...)
			b = append(b, ";q="...)
			b = strconv.AppendInt(b, int64(limit), 10)
			b = append(b, ";w="...)
			b = strconv.AppendInt(b, ceilSeconds(res.Period, 1), 10)
			v.cut(hdrPolicy, len(b))
		}
		b = append(b, name...)
		b = append(b, ";r="...)
		if c.legacy {
			b = append(b, b[rs:re]...) // formatted once
		} else {
			b = strconv.AppendInt(b, remaining, 10)
		}
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, t, 10)
		v.cut(hdrRateLimit, len(b))
	}
	if !res.Allowed {
		b = strconv.AppendInt(b, retry, 10)
		v.cut(hdrRetryAfter, len(b))
		ht.problem[1] = noStore // where problem.write puts it too
		h[hdrCacheControl] = ht.problem[1:2:2]
	}
	v.set(h, ht, b, merge)
}

// headerValues lists the header fields setHeaders sets, in order: each
// value is either cut from the text, ending at its offset, or a constant
// put in vals already.
type headerValues struct {
	names [6]string
	ends  [6]int // -1 for a constant
	n     int
}

func (v *headerValues) cut(name string, end int) {
	v.names[v.n], v.ends[v.n] = name, end
	v.n++
}

func (v *headerValues) constant(vals *[6]string, name, value string) {
	v.names[v.n], v.ends[v.n], vals[v.n] = name, -1, value
	v.n++
}

// set cuts the values from b, which is written once and never again (the
// string may share its bytes, which live as long as the headers do), and
// assigns each to its field from ht's vals. With merge, RateLimit-Policy
// and RateLimit extend the lists an outer limiter set.
func (v *headerValues) set(h http.Header, ht *headerText, b []byte, merge bool) {
	s := unsafe.String(unsafe.SliceData(b), len(b))
	vals := &ht.vals
	start := 0
	for i := range v.n {
		name := v.names[i]
		if end := v.ends[i]; end >= 0 {
			vals[i] = s[start:end]
			start = end
		}
		if merge && (name == hdrPolicy || name == hdrRateLimit) {
			if existing := h[name]; len(existing) > 0 {
				h[name] = appendField(existing, vals[i])
				continue
			}
		}
		// Three-index slices: a later Add must copy, not write into the next.
		h[name] = vals[i : i+1 : i+1]
	}
}

// resetTimes returns, in whole seconds rounded up, when res's quota is
// whole again, RateLimit's t, and Retry-After (0 on an admission). t is
// the reset; on a denial, when this request could pass, so that
// Retry-After, which must win, never points earlier.
func resetTimes(res algorithms.Result) (reset, t, retry int64) {
	reset = ceilSeconds(res.ResetAfter, 0)
	if res.Allowed {
		return reset, reset, 0
	}
	retry = ceilSeconds(res.RetryAfter, 1)
	return reset, retry, retry
}

// appendField adds values to a list field that an outer limiter (a looser
// limit for a whole network, a concurrency limit) may have set already, so
// that a response lists every limit that applies. It copies, never writing
// into a slice another response shares.
func appendField(existing []string, values ...string) []string {
	return append(existing[:len(existing):len(existing)], values...)
}

// policySet is how the limits of one limiter appear in responses: every
// policy in RateLimit-Policy, each under its own name, and a 429 body that
// names the violated one.
type policySet struct {
	header  string    // the RateLimit-Policy value
	names   [][]byte  // policy i's name as an sf-string
	tooMany []problem // the 429 for a denial bound by policy i
	quotas  []int     // policy i's quota
	limits  []string  // and its X-RateLimit-Limit value
}

// newPolicySet describes l's limits, or returns nil when l does not
// describe them (a limiter not made by algorithms.New): the headers then
// carry the binding limit alone, under the policy name. One limit keeps the
// policy name; several are named after it with their window in seconds,
// such as "search-1s" and "search-3600s".
func (c *config) newPolicySet(l algorithms.Limiter) *policySet {
	d, ok := l.(describer)
	if !ok {
		return nil
	}
	policies := d.Policies()
	if len(policies) == 0 {
		return nil
	}
	ps := &policySet{}
	var header []byte
	seen := map[string]bool{}
	for i, p := range policies {
		w := ceilSeconds(p.Window, 1)
		name := c.policyName
		if len(policies) > 1 {
			name = c.policyName + "-" + strconv.FormatInt(w, 10) + "s"
			if seen[name] {
				name += "-" + strconv.Itoa(i+1)
			}
		}
		seen[name] = true
		sf, err := sfString(name)
		if err != nil {
			// The suffix made the name too long: announce the binding
			// limit alone, under the policy name.
			return nil
		}
		if i > 0 {
			header = append(header, ", "...)
		}
		header = append(header, sf...)
		header = append(header, ";q="...)
		quota := max(p.Quota, 0) // a custom limiter's Policies may say anything
		header = strconv.AppendInt(header, int64(quota), 10)
		header = append(header, ";w="...)
		header = strconv.AppendInt(header, w, 10)
		ps.names = append(ps.names, sf)
		ps.quotas = append(ps.quotas, quota)
		ps.limits = append(ps.limits, strconv.Itoa(quota))
		ps.tooMany = append(ps.tooMany, newTooMany(name))
	}
	ps.header = string(header)
	return ps
}

// policiesOf returns the policy set of a limiter WithLimiterFunc picked,
// describing each limiter once. Only limiters held by pointer are cached
// (others may not even be usable as map keys), and at most
// maxCachedPolicySets of them, in case a limiter is made per request.
func (c *config) policiesOf(l algorithms.Limiter) *policySet {
	if reflect.TypeOf(l).Kind() != reflect.Pointer {
		return c.newPolicySet(l)
	}
	if ps, ok := c.policyCache.Load(l); ok {
		return ps.(*policySet)
	}
	ps := c.newPolicySet(l)
	if c.policyCached.Add(1) <= maxCachedPolicySets {
		c.policyCache.Store(l, ps)
	}
	return ps
}

// maxCachedPolicySets bounds policiesOf's cache.
const maxCachedPolicySets = 1024

// ceilSeconds returns d in whole seconds, rounded up, and at least least.
func ceilSeconds(d time.Duration, least int64) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return max(s, least)
}

// ceilUnix returns t as a Unix time in seconds, rounded up.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}
