package middleware

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// closedWithin reports whether ch closes within d; with d 0, whether it is
// closed already.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	default:
		if d == 0 {
			return false
		}
	}
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

func TestDecisionDeadline(t *testing.T) {
	// Without Done: Err reads the clock.
	d := newDecision(context.Background(), 20*time.Millisecond)
	if dl, ok := d.Deadline(); !ok || time.Until(dl) > 20*time.Millisecond {
		t.Errorf("Deadline %v %v", dl, ok)
	}
	if err := d.Err(); err != nil {
		t.Errorf("Err before the deadline: %v", err)
	}
	time.Sleep(25 * time.Millisecond)
	if err := d.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err after the deadline: %v", err)
	}
	if !closedWithin(d.Done(), 0) {
		t.Error("Done after the deadline is not closed")
	}
	d.release()
	if err := d.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("release changed Err to %v", err)
	}

	// With Done: the timer closes it.
	start := time.Now()
	d = newDecision(context.Background(), 20*time.Millisecond)
	if !closedWithin(d.Done(), time.Second) {
		t.Fatal("Done not closed at the deadline")
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Errorf("Done closed after %s, before the deadline", took)
	}
	if err := d.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err %v", err)
	}
	d.release()

	// A parent with an earlier deadline wins.
	parent, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	pd, _ := parent.Deadline()
	d = newDecision(parent, time.Hour)
	if dl, _ := d.Deadline(); !dl.Equal(pd) {
		t.Errorf("Deadline %v, want the parent's %v", dl, pd)
	}
	if !closedWithin(d.Done(), time.Second) || d.Err() == nil {
		t.Error("not done at the parent's deadline")
	}
	d.release()
}

func TestDecisionParentCanceled(t *testing.T) {
	type key struct{}
	for _, armed := range []bool{false, true} {
		parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
		d := newDecision(parent, time.Hour)
		if d.Value(key{}) != "v" {
			t.Error("Value does not reach the parent")
		}
		var done <-chan struct{}
		if armed {
			done = d.Done()
		}
		cancel()
		if armed && !closedWithin(done, time.Second) {
			t.Fatal("Done not closed when the parent was canceled")
		}
		if err := d.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("armed %v: Err %v, want Canceled", armed, err)
		}
		if !closedWithin(d.Done(), 0) {
			t.Errorf("armed %v: Done open after the parent was canceled", armed)
		}
		d.release()
	}
}

func TestDecisionRelease(t *testing.T) {
	for _, armed := range []bool{false, true} {
		d := newDecision(context.Background(), time.Hour)
		var done <-chan struct{}
		if armed {
			done = d.Done()
		}
		// A context derived from the decision ends with it.
		child, cancel := context.WithCancel(d)
		defer cancel()
		d.release()
		if err := d.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("armed %v: Err after release %v, want Canceled", armed, err)
		}
		if armed && !closedWithin(done, 0) {
			t.Error("Done open after release")
		}
		if !closedWithin(d.Done(), 0) || !closedWithin(child.Done(), time.Second) {
			t.Errorf("armed %v: the decision or its child is not done after release", armed)
		}
	}
}

func TestDecisionConcurrent(t *testing.T) {
	// For the race detector: all methods at once, ending by each cause.
	for range 50 {
		parent, cancel := context.WithCancel(context.Background())
		d := newDecision(parent, time.Millisecond)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				<-d.Done()
				if d.Err() == nil {
					t.Error("Done closed with a nil Err")
				}
			})
			wg.Go(func() { _ = d.Err() })
		}
		wg.Go(cancel)
		time.Sleep(time.Millisecond)
		d.release()
		wg.Wait()
	}
}
