package grpclimit

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// answer is what the interceptor does with a call: let it go on with
// header metadata, or end it with err and trailer metadata.
type answer struct {
	header  metadata.MD // the rate-limit fields of a call that goes on
	trailer metadata.MD // sent with err
	err     error       // the status that ends the call; nil to go on
}

// denied is the answer to a call the limit refused: ResourceExhausted
// with RetryInfo and QuotaFailure, and the fields, retry-after and
// grpc-retry-pushback-ms in a trailers-only response.
func (c *config) denied(res algorithms.Result, p *policy, identity string) answer {
	md := c.fields(res, p)
	retryFields(md, max(res.RetryAfter, time.Millisecond))
	name := p.nameOf(res.Index)
	period := max(res.Period, time.Microsecond)
	retry := time.Duration(ceilMillis(res.RetryAfter)) * time.Millisecond
	st := status.New(codes.ResourceExhausted,
		fmt.Sprintf("rate limit %q exceeded: %d per %s; retry after %s", name, res.Limit, period, retry))
	st = withDetails(st,
		&errdetails.RetryInfo{RetryDelay: durationpb.New(max(res.RetryAfter, time.Millisecond))},
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject:     subjectOf(identity),
			Description: fmt.Sprintf("%d per %s", res.Limit, period),
			QuotaId:     name,
			QuotaValue:  int64(res.Limit),
		}}})
	return answer{trailer: md, err: st.Err()}
}

// tooCostly is the answer to a call whose cost exceeds the whole quota:
// ResourceExhausted with QuotaFailure but no RetryInfo, since no retry
// can pass, and a pushback of -1, which tells a client not to retry.
func tooCostly(p *policy, identity string) answer {
	md := metadata.MD{}
	retryFields(md, 0)
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("the call's cost exceeds the whole quota of %q", p.name))
	st = withDetails(st, &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
		Subject:     subjectOf(identity),
		Description: "the call's cost exceeds the whole quota",
		QuotaId:     p.name,
	}}})
	return answer{trailer: md, err: st.Err()}
}

// unavailable is the answer when nothing could decide and the policy is
// to fail closed: Unavailable, with RetryInfo, retry-after and
// grpc-retry-pushback-ms of WithUnavailableRetryAfter.
func (c *config) unavailable() answer {
	md := metadata.MD{}
	retryFields(md, c.unavailableAfter)
	st := withDetails(status.New(codes.Unavailable, "the rate limiter cannot decide; retry later"),
		&errdetails.RetryInfo{RetryDelay: durationpb.New(c.unavailableAfter)})
	return answer{trailer: md, err: st.Err()}
}

// keyError is the answer to a call whose key function failed:
// Unauthenticated for want of a valid credential, InvalidArgument
// otherwise. The key function's error is never shown: it may describe a
// credential.
func keyError(err error) answer {
	if isCredentialError(err) {
		return answer{err: status.Error(codes.Unauthenticated, "missing or invalid credential")}
	}
	if errors.Is(err, errForwardedTooLong) {
		return answer{err: status.Error(codes.InvalidArgument, "forwarding metadata too long")}
	}
	return answer{err: status.Error(codes.InvalidArgument, "the call cannot be attributed to a caller")}
}

// invalid is the answer to a key or cost the limiter refused.
func invalid(err error) answer {
	if errors.Is(err, algorithms.ErrInvalidCost) {
		return answer{err: status.Error(codes.InvalidArgument, "the call's cost must be at least 1")}
	}
	return answer{err: status.Error(codes.InvalidArgument, "invalid rate-limit key")}
}

// isCredentialError reports whether the key function failed for want of a
// valid credential: a missing, unknown or invalid API key or token.
func isCredentialError(err error) bool {
	return errors.Is(err, keyfunc.ErrNoAPIKey) || errors.Is(err, keyfunc.ErrInvalidAPIKey) ||
		errors.Is(err, keyfunc.ErrNoToken) || errors.Is(err, keyfunc.ErrInvalidToken)
}

// withDetails returns st with details; st itself when they cannot be
// added (they always can: they are well-formed messages).
func withDetails(st *status.Status, details ...protoadapt.MessageV1) *status.Status {
	if d, err := st.WithDetails(details...); err == nil {
		return d
	}
	return st
}

// subjectOf names the kind of identity a call was counted under, from its
// key's namespaces ("ip", "key", "sub", "rpc+ip"), never its value: keys
// hold addresses and credentials' digests, which a status need not carry.
func subjectOf(identity string) string {
	var kinds []string
	for part := range strings.SplitSeq(identity, keyfunc.Separator) {
		kind, _, ok := strings.Cut(part, ":")
		if !ok || kind == "" || len(kind) > 16 {
			kind = "caller"
		}
		kinds = append(kinds, kind)
	}
	return strings.Join(kinds, "+")
}
