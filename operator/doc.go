// Package operator serves an HTTP handler for the people who run a
// service: list its rate-limit policies, look at one client's state on one
// route, and reset it, on one route or all of a policy's.
//
// The handler authenticates nothing and authorizes nothing: whoever can
// reach it can unblock any client. Mount it behind your own
// authentication, on an address clients cannot reach, for example:
//
//	ops, err := operator.New(policies)
//	mux.Handle("/ops/", requireStaff(http.StripPrefix("/ops", ops)))
//
// Relative to where it is mounted it answers:
//
//	GET  /policies                                  the policies and their routes
//	GET  /policies/{name}?identity=ID&route=PATTERN what the client's next request would get
//	POST /policies/{name}?identity=ID[&route=PATTERN]  reset the client on one route, or all
//	                                                (DELETE does the same)
//
// ID is the identity the middleware's key function returns
// ("ip:203.0.113.7", "sub:alice", "key:" and keyfunc.HashAPIKey of an API
// key: never a raw key, which is refused), PATTERN one of the policy's
// route patterns. The key is built by middleware.ScopedKey, the code the
// middleware counts by. Answers are JSON; failures are RFC 9457 problem
// documents: 404 for an unknown policy or route, 400 for a missing or
// malformed identity, 405 for a wrong method, 503 when the store (Redis)
// cannot answer. No answer or log line holds an identity.
package operator
