package pause

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestFor: For waits its duration, ends with its context, and does not
// wait at all for a duration of zero or less or an ended context.
func TestFor(t *testing.T) {
	background := func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }
	ended := func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	}
	short := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 20*time.Millisecond)
	}
	for _, tc := range []struct {
		name        string
		ctx         func() (context.Context, context.CancelFunc)
		d           time.Duration
		err         error
		least, most time.Duration
	}{
		{"waits d", background, 30 * time.Millisecond, nil, 30 * time.Millisecond, 2 * time.Second},
		{"zero", background, 0, nil, 0, 100 * time.Millisecond},
		{"negative", background, -time.Second, nil, 0, 100 * time.Millisecond},
		{"ended before", ended, time.Hour, context.Canceled, 0, 100 * time.Millisecond},
		{"ended during", short, time.Hour, context.DeadlineExceeded, 20 * time.Millisecond, 2 * time.Second},
		{"ended, zero", ended, 0, context.Canceled, 0, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			start := time.Now()
			err := For(ctx, tc.d)
			took := time.Since(start)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("For = %v, want %v", err, tc.err)
			}
			if took < tc.least || took > tc.most {
				t.Fatalf("For took %v, want from %v to %v", took, tc.least, tc.most)
			}
		})
	}
}
