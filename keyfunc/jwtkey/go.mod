module github.com/redlimit/redlimit/keyfunc/jwtkey

go 1.25.0

require (
	github.com/golang-jwt/jwt/v5 v5.3.1
	github.com/redlimit/redlimit v0.0.0
)

replace github.com/redlimit/redlimit => ../../
