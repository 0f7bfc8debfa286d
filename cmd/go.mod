module github.com/redlimit/redlimit/cmd

go 1.25.0

replace github.com/redlimit/redlimit => ../

replace github.com/redlimit/redlimit/config => ../config

require (
	github.com/redlimit/redlimit v0.0.0
	github.com/redlimit/redlimit/config v0.0.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-chi/chi/v5 v5.5.0 // indirect
	github.com/redis/go-redis/v9 v9.22.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
