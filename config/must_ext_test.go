package config_test

import (
	"context"
	"time"
)

// closeCtx is the context a test closes a store with: Redis may be down,
// so Close sends what the store owes for a second at most.
func closeCtx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	time.AfterFunc(time.Second, cancel)
	return ctx
}
