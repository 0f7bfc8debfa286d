package redisstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// A wheel's channels close once their deadline has passed, never before,
// in deadline order however they were asked for, and none is left behind;
// a wheel context ends with DeadlineExceeded.
func TestDeadlineWheel(t *testing.T) {
	w := newDeadlineWheel()
	start := time.Now()
	late := w.after(60 * time.Millisecond)
	early := w.after(20 * time.Millisecond) // asked later, due sooner: re-arms the timer
	<-early
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("20 ms deadline closed after %s", d)
	}
	select {
	case <-late:
		t.Fatalf("60 ms deadline closed with the 20 ms one, after %s", time.Since(start))
	default:
	}
	<-late
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Errorf("60 ms deadline closed after %s", d)
	}
	<-w.after(0)
	<-w.after(-time.Second)

	ctx := w.contextFor(5 * time.Millisecond)
	if ctx.Err() != nil {
		t.Errorf("context ended at once: %v", ctx.Err())
	}
	if d, ok := ctx.Deadline(); !ok || d.IsZero() {
		t.Error("context without a deadline")
	}
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("context ended with %v", ctx.Err())
	}

	// Many goroutines at once (for the race detector), every channel
	// closing no sooner than asked.
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			d := time.Duration(i%37) * time.Millisecond
			began := time.Now()
			<-w.after(d)
			if took := time.Since(began); took < d {
				t.Errorf("%s deadline closed after %s", d, took)
			}
		})
	}
	wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buckets) != 0 {
		t.Errorf("%d buckets left after every deadline passed", len(w.buckets))
	}
}

// expireAll closes every channel and context the wheel handed out at once,
// a context then ending with Canceled, not DeadlineExceeded; what is asked
// for afterwards keeps its own deadline.
func TestDeadlineWheelExpireAll(t *testing.T) {
	w := newDeadlineWheel()
	waits := []<-chan struct{}{w.after(time.Hour), w.after(time.Second), w.cutOff()}
	ctx := w.contextFor(time.Hour)
	w.expireAll()
	for i, ch := range append(waits, ctx.Done()) {
		select {
		case <-ch:
		default:
			t.Fatalf("wait %d still open after expireAll", i)
		}
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("context ended by expireAll with %v, want Canceled", ctx.Err())
	}
	began := time.Now()
	later, cut := w.after(20*time.Millisecond), w.cutOff()
	select {
	case <-cut:
		t.Fatal("a cutOff asked for after expireAll is closed")
	case <-later:
	}
	if d := time.Since(began); d < 20*time.Millisecond {
		t.Errorf("a 20 ms deadline asked for after expireAll closed after %s", d)
	}
}
