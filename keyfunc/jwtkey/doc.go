// Package jwtkey keys requests by the subject of a verified JWT bearer
// token, for the redlimit middleware: "sub:alice", or with several issuers
// "iss:<issuer>,sub:<subject>".
//
// It is a module of its own (github.com/redlimit/redlimit/keyfunc/jwtkey),
// so that a program keyed by client IP or API key never compiles
// golang-jwt:
//
//	go get github.com/redlimit/redlimit/keyfunc/jwtkey
//
// Its key functions are [keyfunc.KeyFunc] values: they go into
// keyfunc.FirstOf and keyfunc.Join like any other, and their errors wrap
// keyfunc.ErrNoToken or keyfunc.ErrInvalidToken, which the middleware
// answers with 401 and a Bearer challenge:
//
//	key := keyfunc.FirstOf(
//		jwtkey.Subject(verify, jwt.WithValidMethods([]string{"HS256"})),
//		keyfunc.IP(),
//	)
package jwtkey
