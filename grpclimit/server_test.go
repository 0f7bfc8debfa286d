package grpclimit_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/grpclimit"
)

// TestUnaryExactCounts: on every algorithm a quota of 5 admits exactly 5
// calls from one client and refuses the rest with ResourceExhausted,
// RetryInfo and QuotaFailure; admitted calls carry the rate-limit fields
// as headers, refused ones in trailers with retry-after and the pushback.
func TestUnaryExactCounts(t *testing.T) {
	for _, alg := range algorithms.All() {
		t.Run(string(alg), func(t *testing.T) {
			addr := serveLimited(t, newLimiter(t, alg, algorithms.PerMinute(5)), grpclimit.WithPolicyName("unary"))
			c := dial(t, addr)
			var got []codes.Code
			for i := range 8 {
				code, header, trailer, err := call(t, c)
				got = append(got, code)
				if code == codes.OK {
					if want := strconv.Itoa(4 - i); header.Get("x-ratelimit-remaining")[0] != want {
						t.Errorf("call %d: x-ratelimit-remaining %v, want %s", i, header.Get("x-ratelimit-remaining"), want)
					}
					checkFields(t, header, `"unary";q=5;w=60`)
					continue
				}
				checkRefusal(t, err, trailer, "unary", 5)
				if i == 5 {
					t.Logf("a refused call, as the client sees it:\n%s", describeRefusal(err, trailer))
				}
			}
			if n := count(got); n[codes.OK] != 5 || n[codes.ResourceExhausted] != 3 {
				t.Fatalf("codes %v, want 5 OK and 3 ResourceExhausted", got)
			}
		})
	}
}

// checkFields checks the rate-limit fields every decided call carries.
func checkFields(t *testing.T, md metadata.MD, policy string) {
	t.Helper()
	for _, k := range []string{"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "ratelimit"} {
		if len(md.Get(k)) != 1 {
			t.Errorf("%s: %v, want one value (metadata %v)", k, md.Get(k), md)
		}
	}
	if got := md.Get("ratelimit-policy"); len(got) != 1 || got[0] != policy {
		t.Errorf("ratelimit-policy %v, want %q", got, policy)
	}
}

// checkRefusal checks a refusal: its code, details and trailers.
func checkRefusal(t *testing.T, err error, trailer metadata.MD, policy string, quota int64) {
	t.Helper()
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("status %v, want ResourceExhausted", err)
	}
	ri, qf := details(err)
	if ri == nil || ri.GetRetryDelay().AsDuration() <= 0 {
		t.Errorf("RetryInfo %v, want a positive delay", ri)
	}
	if qf == nil || len(qf.GetViolations()) != 1 {
		t.Fatalf("QuotaFailure %v, want one violation", qf)
	}
	v := qf.GetViolations()[0]
	if v.GetQuotaId() != policy || v.GetQuotaValue() != quota || v.GetSubject() == "" {
		t.Errorf("violation %v, want quota id %q, value %d and a subject", v, policy, quota)
	}
	ms, err2 := strconv.Atoi(first(trailer, "grpc-retry-pushback-ms"))
	if err2 != nil || ms < 1 || time.Duration(ms)*time.Millisecond < ri.GetRetryDelay().AsDuration() {
		t.Errorf("grpc-retry-pushback-ms %q, want the retry delay %v in ms, rounded up", first(trailer, "grpc-retry-pushback-ms"), ri.GetRetryDelay().AsDuration())
	}
	if s, err := strconv.Atoi(first(trailer, "retry-after")); err != nil || s < 1 {
		t.Errorf("retry-after %q, want whole seconds", first(trailer, "retry-after"))
	}
	if first(trailer, "x-ratelimit-remaining") != "0" || !strings.Contains(first(trailer, "ratelimit"), ";r=0;") {
		t.Errorf("trailer %v, want the rate-limit fields with nothing remaining", trailer)
	}
}

// first returns md's first value for key, "" when none.
func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// describeRefusal prints a refusal as a client decodes it.
func describeRefusal(err error, trailer metadata.MD) string {
	st := status.Convert(err)
	var b strings.Builder
	fmt.Fprintf(&b, "code: %s\nmessage: %s\n", st.Code(), st.Message())
	ri, qf := details(err)
	if ri != nil {
		fmt.Fprintf(&b, "google.rpc.RetryInfo: retry_delay=%s\n", ri.GetRetryDelay().AsDuration())
	}
	for _, v := range qf.GetViolations() {
		fmt.Fprintf(&b, "google.rpc.QuotaFailure: subject=%q description=%q quota_id=%q quota_value=%d\n",
			v.GetSubject(), v.GetDescription(), v.GetQuotaId(), v.GetQuotaValue())
	}
	for _, k := range []string{"retry-after", "grpc-retry-pushback-ms", "ratelimit", "ratelimit-policy",
		"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"} {
		if v := trailer.Get(k); len(v) > 0 {
			fmt.Fprintf(&b, "trailer %s: %s\n", k, strings.Join(v, ", "))
		}
	}
	return b.String()
}

// TestSeveralLimitsAndMethods: a limiter with two limits names both in
// ratelimit-policy and binds the tighter; each method counts apart by
// default, and a method limiter applies to its method only.
func TestSeveralLimitsAndMethods(t *testing.T) {
	main := newLimiter(t, algorithms.FixedWindow, algorithms.PerSecond(3), algorithms.PerHour(100))
	strict := newLimiter(t, algorithms.FixedWindow, algorithms.PerMinute(1))
	addr := serveLimited(t, main, grpclimit.WithPolicyName("api"),
		grpclimit.WithMethodLimiter(emptyMethod, "empty", strict))
	c := dial(t, addr)

	var got []codes.Code
	for range 4 {
		code, header, trailer, err := call(t, c)
		got = append(got, code)
		if code == codes.OK {
			checkFields(t, header, `"api-1s";q=3;w=1, "api-3600s";q=100;w=3600`)
		} else {
			checkRefusal(t, err, trailer, "api-1s", 3)
		}
	}
	if n := count(got); n[codes.OK] != 3 {
		t.Errorf("UnaryCall codes %v, want 3 OK", got)
	}
	ctx := context.Background()
	var header metadata.MD
	if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}, grpc.Header(&header)); err != nil {
		t.Fatalf("EmptyCall counts apart from UnaryCall: %v", err)
	}
	checkFields(t, header, `"empty";q=1;w=60`)
	if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second EmptyCall: %v, want ResourceExhausted from the method's limiter", err)
	}
}

// TestMethodScopeOff: without the method scope, two methods share a count.
func TestMethodScopeOff(t *testing.T) {
	addr := serveLimited(t, newLimiter(t, algorithms.FixedWindow, algorithms.PerMinute(2)), grpclimit.WithMethodScope(false))
	c := dial(t, addr)
	if code, _, _, _ := call(t, c); code != codes.OK {
		t.Fatal(code)
	}
	if _, err := c.EmptyCall(context.Background(), &testgrpc.Empty{}); err != nil {
		t.Fatal(err)
	}
	if code, _, _, _ := call(t, c); code != codes.ResourceExhausted {
		t.Fatalf("third call across methods: %v, want ResourceExhausted", code)
	}
}
