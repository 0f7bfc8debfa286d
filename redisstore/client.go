package redisstore

import (
	"reflect"
	"runtime"

	"github.com/redis/go-redis/v9"
)

// resends reports whether client may send a command again after its reply
// was lost: any client but a Client with MaxRetries -1 (which its options
// hold as 0 once the client is made; a ClusterClient retries up to
// MaxRedirects times whatever MaxRetries says).
func resends(client redis.UniversalClient) bool {
	c, ok := client.(*redis.Client)
	return !ok || c.Options().MaxRetries > 0
}

// honoursDeadlines reports whether client bounds a command by its
// context's deadline (ContextTimeoutEnabled), which a call made on a
// caller's goroutine needs.
func honoursDeadlines(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// isNilValue reports whether v is nil or holds a nil pointer (or map, func,
// ...), which would panic when used.
func isNilValue(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return r.IsNil()
	}
	return false
}

// poolSize returns the client's connection pool size, the default bound on
// calls in flight.
func poolSize(client redis.UniversalClient) int {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().PoolSize
	case *redis.ClusterClient:
		return c.Options().PoolSize
	}
	return 10 * runtime.GOMAXPROCS(0)
}
