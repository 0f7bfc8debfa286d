module github.com/redlimit/redlimit/grpclimit

go 1.25.0

require (
	github.com/golang-jwt/jwt/v5 v5.3.1
	github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.4
	github.com/redis/go-redis/v9 v9.22.0
	github.com/redlimit/redlimit v0.0.0
	github.com/redlimit/redlimit/keyfunc/jwtkey v0.0.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260706201446-f0a921348800
	google.golang.org/grpc v1.84.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.40.0 // indirect
)

replace github.com/redlimit/redlimit => ../

replace github.com/redlimit/redlimit/keyfunc/jwtkey => ../keyfunc/jwtkey
