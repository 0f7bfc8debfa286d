package breaker

import (
	"slices"
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

// probeAt runs the breaker forward from at, 1 ms at a time, to the first
// instant Allow lets a probe through, and returns it.
func probeAt(t *testing.T, b *Breaker, at time.Time) time.Time {
	t.Helper()
	for end := at.Add(time.Minute); at.Before(end); at = at.Add(ms(1)) {
		if ok, probe := b.Allow(at); ok {
			if !probe {
				t.Fatalf("at %s: a call went through the open breaker without probing", at.Sub(t0))
			}
			return at
		}
	}
	t.Fatal("no probe within a minute")
	return at
}

// Each failed probe doubles the open time, up to MaxOpenFor; a probe's
// success sets it back to OpenFor. Without MaxOpenFor there is no backoff.
func TestBackoff(t *testing.T) {
	b := New(Config{Failures: 1, OpenFor: ms(100), MaxOpenFor: ms(700)}, nil)
	b.Record(t0, false, false)
	at := t0
	var gaps []time.Duration
	for range 6 {
		next := probeAt(t, b, at)
		gaps = append(gaps, next.Sub(at))
		at = next
		b.Record(at, false, true)
	}
	want := []time.Duration{ms(100), ms(200), ms(400), ms(700), ms(700), ms(700)}
	if !slices.Equal(gaps, want) {
		t.Fatalf("open times %v, want %v", gaps, want)
	}
	at = probeAt(t, b, at)
	b.Record(at, true, true) // closed: back to OpenFor
	b.Record(at, false, false)
	if got := probeAt(t, b, at).Sub(at); got != ms(100) || b.OpenFor() != ms(100) {
		t.Fatalf("after a success: open for %s (OpenFor() %s), want 100ms", got, b.OpenFor())
	}

	flat := New(Config{Failures: 1, OpenFor: ms(100)}, nil)
	flat.Record(t0, false, false)
	at = t0
	for range 3 {
		next := probeAt(t, flat, at)
		if next.Sub(at) != ms(100) {
			t.Fatalf("without MaxOpenFor: open for %s, want 100ms each time", next.Sub(at))
		}
		at = next
		flat.Record(at, false, true)
	}
}

// Trip opens a closed breaker at once, whatever its counts; ends a probe as
// a failure (doubling the open time), whose own outcome is then ignored;
// and leaves an open breaker's open time running.
func TestTrip(t *testing.T) {
	var log []string
	b := New(Config{Failures: 5, OpenFor: ms(100), MaxOpenFor: time.Second}, func(from, to State, reason string) {
		log = append(log, from.String()+">"+to.String()+" "+reason)
	})
	b.Record(t0, true, false)
	b.Trip(t0, "refused")
	if b.State() != Open {
		t.Fatalf("state %s after Trip, want open", b.State())
	}
	b.Trip(t0.Add(ms(99)), "refused") // open: the open time runs on
	at := probeAt(t, b, t0)
	if at != t0.Add(ms(100)) {
		t.Fatalf("probe at %s, want 100ms: a Trip while open moved the open time", at.Sub(t0))
	}
	b.Trip(at.Add(ms(1)), "refused") // the probe's store refused: open, for twice as long
	b.Record(at.Add(ms(2)), true, true)
	if b.State() != Open {
		t.Fatalf("state %s: a probe's outcome after Trip ended it counted", b.State())
	}
	if next := probeAt(t, b, at); next != at.Add(ms(201)) {
		t.Fatalf("next probe %s after the tripped one, want 201ms", next.Sub(at))
	}
	want := []string{"closed>open refused", "open>half-open probing after the open time", "half-open>open refused",
		"open>half-open probing after the open time"}
	if !slices.Equal(log, want) {
		t.Fatalf("changes %q, want %q", log, want)
	}
}
