// Package pause waits for a while or until a context ends, whichever comes
// first: the one wait of redlimit's retry loops and of algorithms.Wait.
package pause

import (
	"context"
	"time"
)

// For waits d, or until ctx ends: it returns nil after d, and ctx's error
// when ctx ended first (at once when it had already ended). A d of zero
// or less does not wait, and returns ctx's error if any.
func For(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
