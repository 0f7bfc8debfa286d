module github.com/redlimit/redlimit/bench

go 1.25.0

require (
	github.com/go-chi/httprate v0.16.1
	github.com/go-chi/httprate-redis v0.6.0
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/redis/go-redis/v9 v9.22.0
	github.com/redlimit/redlimit v0.0.0
	github.com/redlimit/redlimit/httpratecounter v0.0.0
	github.com/ulule/limiter/v3 v3.11.2
	golang.org/x/time v0.15.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

replace github.com/redlimit/redlimit => ../

replace github.com/redlimit/redlimit/httpratecounter => ../httpratecounter
