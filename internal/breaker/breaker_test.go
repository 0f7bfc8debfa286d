package breaker

import (
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestOpensOnEvidenceOnly(t *testing.T) {
	cfg := Config{Failures: 3, Ratio: 0.5, MinCalls: 10, Window: time.Second, OpenFor: ms(500)}
	fail, ok := false, true
	tests := []struct {
		name     string
		outcomes []bool
		spacing  time.Duration
		want     State
	}{
		{"one failure", []bool{fail}, ms(1), Closed},
		{"failures broken by a success", []bool{fail, fail, ok, fail, fail}, ms(1), Closed},
		{"consecutive failures", []bool{fail, fail, fail}, ms(1), Open},
		{"ratio with too few calls", []bool{fail, ok, fail, ok, fail, ok}, ms(1), Closed},
		{"ratio reached", []bool{ok, fail, ok, fail, ok, fail, ok, fail, ok, fail}, ms(1), Open},
		{"ratio spread over windows", []bool{ok, fail, ok, fail, ok, fail, ok, fail, ok, fail}, ms(300), Closed},
		{"mostly successes", []bool{ok, ok, fail, ok, ok, fail, ok, ok, ok, fail, ok, ok}, ms(1), Closed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			changes := 0
			b := New(cfg, func(from, to State, reason string) { changes++ })
			for i, success := range tc.outcomes {
				b.Record(t0.Add(time.Duration(i)*tc.spacing), success, false)
			}
			if got := b.State(); got != tc.want {
				t.Fatalf("state %s, want %s", got, tc.want)
			}
			if want := map[State]int{Closed: 0, Open: 1}[tc.want]; changes != want {
				t.Fatalf("%d changes logged, want %d", changes, want)
			}
		})
	}
}

func TestProbe(t *testing.T) {
	var log []string
	b := New(Config{Failures: 1, OpenFor: ms(500)}, func(from, to State, reason string) {
		log = append(log, from.String()+">"+to.String())
	})
	b.Record(t0, false, false)
	if ok, _ := b.Allow(t0.Add(ms(499))); ok {
		t.Fatal("allowed a call while open")
	}
	ok, probe := b.Allow(t0.Add(ms(500)))
	if !ok || !probe {
		t.Fatalf("after the open time: ok %v probe %v, want a probe", ok, probe)
	}
	if ok, _ := b.Allow(t0.Add(ms(501))); ok {
		t.Fatal("a second call went through while the probe was out")
	}
	b.Record(t0.Add(ms(510)), false, true) // the probe failed: open again
	if ok, _ := b.Allow(t0.Add(ms(1009))); ok {
		t.Fatal("allowed a call before the new open time ended")
	}
	if _, probe := b.Allow(t0.Add(ms(1010))); !probe {
		t.Fatal("no probe after the new open time")
	}
	b.CancelProbe() // never sent: another may probe at once
	if _, probe := b.Allow(t0.Add(ms(1011))); !probe {
		t.Fatal("no probe after a canceled one")
	}
	b.Record(t0.Add(ms(1020)), true, true)
	if ok, probe := b.Allow(t0.Add(ms(1021))); !ok || probe || b.State() != Closed {
		t.Fatalf("after a good probe: ok %v probe %v state %s, want closed", ok, probe, b.State())
	}
	got := ""
	for i, l := range log {
		if i > 0 {
			got += " "
		}
		got += l
	}
	if want := "closed>open open>half-open half-open>open open>half-open half-open>open open>half-open half-open>closed"; got != want {
		t.Fatalf("changes %q, want each logged once: %q", got, want)
	}
}

// Outcomes of calls let through before the breaker opened do not move it.
func TestLateOutcomesIgnoredWhileOpen(t *testing.T) {
	b := New(Config{Failures: 2}, nil)
	b.Record(t0, false, false)
	b.Record(t0, false, false)
	b.Record(t0.Add(ms(1)), true, false)
	if b.State() != Open {
		t.Fatalf("state %s after a late success, want open", b.State())
	}
}
