module github.com/redlimit/redlimit/config

go 1.25.0

replace github.com/redlimit/redlimit => ../

require (
	github.com/go-chi/chi/v5 v5.5.0
	github.com/redis/go-redis/v9 v9.22.0
	github.com/redlimit/redlimit v0.0.0
	go.yaml.in/yaml/v3 v3.0.5
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
