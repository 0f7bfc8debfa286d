package grpclimit

import (
	"strconv"
	"strings"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// policy is one limiter and how its limits appear to clients: in the
// ratelimit-policy field, each limit under its own name, and in
// QuotaFailure.
type policy struct {
	limiter algorithms.Limiter
	name    string   // the policy's name, as configured
	store   string   // middleware.Decision.Store for the limiter
	header  string   // the ratelimit-policy value; "" when not described
	names   []string // limit i's name
	sfNames []string // and as a Structured Field string
}

// newPolicy describes l's limits under name. One limit keeps the name;
// several are named after it with their window in seconds, such as
// "search-1s" and "search-3600s", as the HTTP middleware names them. A
// limiter that does not describe its limits (not made by algorithms.New)
// is described from each Result instead.
func newPolicy(l algorithms.Limiter, name string) *policy {
	p := &policy{limiter: l, name: name, store: storeName(l)}
	d, ok := l.(interface{ Policies() []algorithms.Policy })
	if !ok {
		return p
	}
	policies := d.Policies()
	var header []string
	seen := map[string]bool{}
	for i, pol := range policies {
		w := ceilSeconds(pol.Window, 1)
		n := name
		if len(policies) > 1 {
			n = name + "-" + strconv.FormatInt(w, 10) + "s"
			if seen[n] {
				n += "-" + strconv.Itoa(i+1)
			}
		}
		seen[n] = true
		p.names = append(p.names, n)
		p.sfNames = append(p.sfNames, sfString(n))
		header = append(header, sfString(n)+";q="+strconv.Itoa(max(pol.Quota, 0))+";w="+strconv.FormatInt(w, 10))
	}
	p.header = strings.Join(header, ", ")
	return p
}

// nameOf returns the name of the limit at index, or the policy's name.
func (p *policy) nameOf(index int) string {
	if index >= 0 && index < len(p.names) {
		return p.names[index]
	}
	return p.name
}

// storeName is middleware.Decision.Store for l: "memory" or "redis" for a
// limiter of algorithms.New, "custom" for others.
func storeName(l algorithms.Limiter) string {
	if n, ok := l.(algorithms.StoreNamer); ok {
		return n.StoreName()
	}
	return "custom"
}

// sfString quotes a policy name (printable ASCII, as checked) as a
// Structured Field string.
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// ceilSeconds returns d in whole seconds, rounded up, and at least least.
func ceilSeconds(d time.Duration, least int64) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return max(s, least)
}

// ceilMillis returns d in whole milliseconds, rounded up, and at least 1.
func ceilMillis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond > 0 {
		ms++
	}
	return max(ms, 1)
}
