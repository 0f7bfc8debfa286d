package grpclimit

import (
	"strconv"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/redlimit/redlimit/algorithms"
)

// The metadata keys, the HTTP middleware's header names in lower case, as
// gRPC metadata keys are.
const (
	mdLimit      = "x-ratelimit-limit"
	mdRemaining  = "x-ratelimit-remaining"
	mdReset      = "x-ratelimit-reset"
	mdPolicy     = "ratelimit-policy"
	mdRateLimit  = "ratelimit"
	mdRetryAfter = "retry-after"
	mdPushback   = "grpc-retry-pushback-ms"
)

// fields returns the rate-limit metadata of a call p decided with res, as
// the HTTP middleware's headers: x-ratelimit-limit, -remaining and -reset
// (epoch seconds, rounded up), ratelimit-policy and ratelimit. On a
// refusal the ratelimit field's t is the retry delay, as the IETF draft
// asks; retry-after is the refusal's to add.
func (c *config) fields(res algorithms.Result, p *policy) metadata.MD {
	md := make(metadata.MD, 5)
	limit := max(res.Limit, 0)
	remaining := strconv.Itoa(max(res.Remaining, 0))
	resetIn := ceilSeconds(res.ResetAfter, 0)
	t := resetIn
	if !res.Allowed {
		t = ceilSeconds(res.RetryAfter, 1)
	}
	if c.legacy {
		md[mdLimit] = []string{strconv.Itoa(limit)}
		md[mdRemaining] = []string{remaining}
		reset := max(ceilUnix(c.now().Add(max(res.ResetAfter, 0))), 0)
		md[mdReset] = []string{strconv.FormatInt(reset, 10)}
	}
	if c.ietf {
		name := sfString(p.name)
		if p.header != "" && res.Index >= 0 && res.Index < len(p.sfNames) {
			md[mdPolicy] = []string{p.header}
			name = p.sfNames[res.Index]
		} else {
			md[mdPolicy] = []string{name + ";q=" + strconv.Itoa(limit) + ";w=" +
				strconv.FormatInt(ceilSeconds(res.Period, 1), 10)}
		}
		md[mdRateLimit] = []string{name + ";r=" + remaining + ";t=" + strconv.FormatInt(t, 10)}
	}
	return md
}

// retryFields adds what tells a client when to retry: retry-after in whole
// seconds, rounded up, at least 1, and grpc-retry-pushback-ms in
// milliseconds, rounded up, at least 1; a delay of 0 or less means never,
// which is a pushback of -1 and no retry-after.
func retryFields(md metadata.MD, after time.Duration) {
	if after <= 0 {
		md[mdPushback] = []string{"-1"}
		return
	}
	md[mdRetryAfter] = []string{strconv.FormatInt(ceilSeconds(after, 1), 10)}
	md[mdPushback] = []string{strconv.FormatInt(ceilMillis(after), 10)}
}

// ceilUnix returns t as a Unix time in seconds, rounded up.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}
