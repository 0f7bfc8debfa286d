module github.com/redlimit/redlimit/httpratecounter

go 1.25.0

replace github.com/redlimit/redlimit => ../

require (
	github.com/go-chi/chi/v5 v5.5.0
	github.com/go-chi/httprate v0.16.1
	github.com/redis/go-redis/v9 v9.22.0
	github.com/redlimit/redlimit v0.0.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
