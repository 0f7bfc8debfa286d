package config

import (
	"context"
	"time"
)

// must returns v, and panics with err when a store's New fails: the tests
// build stores from options they know to be valid.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// closeCtx is the context a test closes a store with: Redis may be down,
// so Close sends what the store owes for a second at most.
func closeCtx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	time.AfterFunc(time.Second, cancel)
	return ctx
}
