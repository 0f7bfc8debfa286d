package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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

// closeSoon is the context a test closes a store with when what the
// store owes can never land (Redis is unreachable, or refuses the key):
// 100 ms for its goroutines to return, not closeCtx's second of trying.
func closeSoon() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	time.AfterFunc(100*time.Millisecond, cancel)
	return ctx
}

// probeStore is a store on c with opts that the test closes when it ends:
// a second view of the keys another store writes. Its calls wait for
// Redis up to 10 s (a deadline that holds under -race on a busy machine)
// unless opts set another timeout.
func probeStore(t testing.TB, c redis.UniversalClient, opts ...Option) *Store {
	s := must(New(c, append([]Option{WithTimeout(10 * time.Second)}, opts...)...))
	t.Cleanup(func() { _ = s.Close(closeCtx()) })
	return s
}
