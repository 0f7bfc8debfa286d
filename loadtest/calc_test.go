package main

import (
	"net/netip"
	"testing"
	"time"
)

func TestAllowedBy(t *testing.T) {
	perMin := []limitSpec{{60, time.Minute}}
	search := []limitSpec{{5, time.Second}, {100, time.Minute}}
	for _, c := range []struct {
		name   string
		limits []limitSpec
		d      time.Duration
		want   int64
	}{
		{"instant", perMin, 0, 60},
		{"within one window", perMin, 15 * time.Second, 60},
		{"just under a period", perMin, time.Minute - time.Microsecond, 60},
		{"exactly a period: a second window can start", perMin, time.Minute, 120},
		{"two and a half periods", perMin, 150 * time.Second, 180},
		{"per second binds", search, 300 * time.Millisecond, 5},
		{"per second binds after 3.5 s", search, 3500 * time.Millisecond, 20},
		{"per minute binds after 19 s", search, 19 * time.Second, 100},
		{"per minute binds after 61 s", search, 61 * time.Second, 200},
	} {
		if got := allowedBy(c.limits, c.d); got != c.want {
			t.Errorf("%s: allowedBy(%v, %s) = %d, want %d", c.name, c.limits, c.d, got, c.want)
		}
	}
}

func TestDescribeBound(t *testing.T) {
	got := describeBound([]limitSpec{{5, time.Second}, {100, time.Minute}}, 1500*time.Millisecond)
	want := "min(5*(floor(1.5s/1s)+1), 100*(floor(1.5s/1m0s)+1)) = 10"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(n int) []time.Duration {
		s := make([]time.Duration, n)
		for i := range s {
			s[i] = time.Duration(i+1) * time.Millisecond
		}
		return s
	}
	for _, c := range []struct {
		n, p int
		want time.Duration
	}{
		{0, 50, 0},
		{1, 50, time.Millisecond},
		{1, 99, time.Millisecond},
		{2, 50, time.Millisecond},
		{3, 50, 2 * time.Millisecond},
		{100, 50, 50 * time.Millisecond},
		{100, 99, 99 * time.Millisecond},
		{100, 100, 100 * time.Millisecond},
		{1000, 99, 990 * time.Millisecond},
		{101, 99, 100 * time.Millisecond},
	} {
		if got := percentile(ms(c.n), c.p); got != c.want {
			t.Errorf("percentile of 1..%d ms at %d%% = %s, want %s", c.n, c.p, got, c.want)
		}
	}
}

func TestClientAddr(t *testing.T) {
	seen := map[netip.Addr]bool{}
	for i := range 70_000 {
		a, err := clientAddr(1, i)
		if err != nil {
			t.Fatal(err)
		}
		b := a.As4()
		if b[0] != 127 || b[3] == 0 || b[3] == 255 || seen[a] {
			t.Fatalf("client %d: %s is outside 127/8, ends in .0 or .255, or repeats", i, a)
		}
		seen[a] = true
	}
	for _, c := range []struct {
		first, i int
		want     string
	}{
		{1, 0, "127.1.0.1"},
		{1, 253, "127.1.0.254"},
		{1, 254, "127.1.1.1"},
		{1, 9999, "127.1.39.94"},
		{1, 254 * 256, "127.2.0.1"},
		{200, 0, "127.200.0.1"},
	} {
		if a, err := clientAddr(c.first, c.i); err != nil || a.String() != c.want {
			t.Errorf("clientAddr(%d, %d) = %s, %v; want %s", c.first, c.i, a, err, c.want)
		}
	}
	if _, err := clientAddr(254, 254*256); err == nil {
		t.Error("clientAddr past 127.254.255.254: no error")
	}
}

func TestHostRoundTrip(t *testing.T) {
	a := netip.MustParseAddr("127.1.39.94")
	h := hostFor(a, 2)
	if h != "127-1-39-94.i2.loadtest" {
		t.Fatalf("hostFor = %q", h)
	}
	got, inst, err := parseHost(h)
	if err != nil || got != a || inst != 2 {
		t.Fatalf("parseHost(%q) = %s, %d, %v", h, got, inst, err)
	}
	for _, bad := range []string{"127.0.0.1", "127-1-0-1.loadtest", "127-1-0-1.ix.loadtest", "x.i1.loadtest", "::1.i1.loadtest"} {
		if _, _, err := parseHost(bad); err == nil {
			t.Errorf("parseHost(%q): no error", bad)
		}
	}
}

func TestParseCommandStats(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=120,usec=3400,usec_per_call=28.33,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_eval:calls=3,usec=200,usec_per_call=66.67,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_get:calls=246,usec=100,usec_per_call=0.41,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|setinfo:calls=6,usec=9,usec_per_call=1.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=2,usec=90,usec_per_call=45.00,rejected_calls=0,failed_calls=0\r\n"
	calls := parseCommandStats(info)
	if calls["evalsha"] != 120 || calls["eval"] != 3 || calls["client|setinfo"] != 6 {
		t.Fatalf("parsed %v", calls)
	}
	if got := scriptCalls(calls); got != 123 {
		t.Errorf("scriptCalls = %d, want 123", got)
	}
	if got := allCalls(calls); got != 375 {
		t.Errorf("allCalls = %d, want 375 (INFO left out)", got)
	}
}

func TestParseLogLine(t *testing.T) {
	for _, c := range []struct {
		line, level, msg, attrs string
	}{
		{`2026/11/23 06:45:21 WARN redlimit: Redis breaker open from=closed reason="consecutive failures" failure_mode=FailLocal`,
			"WARN", "redlimit: Redis breaker open", `from=closed reason="consecutive failures" failure_mode=FailLocal`},
		{`2026/11/23 06:45:21 ERROR redlimit: Redis could not decide failure_mode=FailLocal error="read tcp: i/o timeout"`,
			"ERROR", "redlimit: Redis could not decide", `failure_mode=FailLocal error="read tcp: i/o timeout"`},
		{`2026/11/23 06:45:21 INFO no attributes here`, "INFO", "no attributes here", ""},
		{`time=2026-11-23T06:45:21.123Z level=ERROR msg="rate limiter failed" failure_policy=open suppressed=0`,
			"ERROR", "rate limiter failed", "failure_policy=open suppressed=0"},
		{`time=2026-11-23T06:45:21.123Z level=WARN msg=short`, "WARN", "short", ""},
		{`panic: runtime error`, "", "panic: runtime error", ""},
	} {
		level, msg, attrs := parseLogLine(c.line)
		if level != c.level || msg != c.msg || attrs != c.attrs {
			t.Errorf("parseLogLine(%q) = %q, %q, %q; want %q, %q, %q", c.line, level, msg, attrs, c.level, c.msg, c.attrs)
		}
	}
}

func TestLocalAllowance(t *testing.T) {
	limits := []limitSpec{{Rate: 5, Period: time.Second}, {Rate: 100, Period: time.Minute}}
	for _, tt := range []struct {
		instances int
		d         time.Duration
		want      int64
	}{
		{1, 500 * time.Millisecond, 5},    // the whole limit, one window
		{3, 500 * time.Millisecond, 3},    // 5/3 = 1 each, three instances
		{3, 1500 * time.Millisecond, 6},   // two windows of 1 each
		{10, 500 * time.Millisecond, 10},  // at least 1 each
		{3, 90 * time.Second, 3 * 33 * 2}, // the per-minute share binds: 33 × 2 windows
	} {
		if got := localAllowance(limits, tt.instances, tt.d); got != tt.want {
			t.Errorf("localAllowance(%d instances, %s) = %d, want %d", tt.instances, tt.d, got, tt.want)
		}
	}
}
