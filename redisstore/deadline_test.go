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
