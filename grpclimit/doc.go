// Package grpclimit rate-limits gRPC calls with redlimit's limiters: the
// algorithms of package algorithms on a Redis store (package redisstore),
// shared by every instance of a service, or in memory (package memstore).
//
// It is a module of its own, so that the users of the HTTP middleware never
// download gRPC.
//
// # Servers
//
// UnaryServerInterceptor and StreamServerInterceptor decide each call
// before its handler runs, under the key a keyfunc.KeyFunc derives from the
// call (see CallRequest): the peer's address by default, or an API key or
// a verified JWT subject from the metadata, scoped to the full method name
// so that each method counts apart. A stream is decided when it opens;
// WithMessageLimiter also limits the messages a stream receives.
//
//	limiter, _ := algorithms.New(store, algorithms.SlidingWindowCounter, algorithms.PerMinute(100))
//	unary, err := grpclimit.UnaryServerInterceptor(limiter,
//		grpclimit.WithKeyFunc(keyfunc.IP(keyfunc.TrustProxies(proxies))))
//	if err != nil {
//		log.Fatal(err) // a misconfiguration
//	}
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(unary))
//
// # What a client sees
//
// Every call the limiter decided carries the rate-limit fields the HTTP
// middleware sends, as header metadata with lower-case keys:
//
//	x-ratelimit-limit: 100
//	x-ratelimit-remaining: 42
//	x-ratelimit-reset: 1767225600
//	ratelimit-policy: "default";q=100;w=60
//	ratelimit: "default";r=42;t=17
//
// A refused call ends with codes.ResourceExhausted and the details
// google.rpc.RetryInfo (the delay after which the same call passes; left
// out when it never can, its cost exceeding the whole quota) and
// google.rpc.QuotaFailure (the violated policy and its quota). Its metadata
// comes in a trailers-only response, so that a client's retry policy
// applies (gRFC A6 retries trailers-only responses alone): the fields
// above, retry-after (whole seconds, rounded up) and grpc-retry-pushback-ms
// (the delay in milliseconds, which a grpc-go client with a retry policy
// for RESOURCE_EXHAUSTED waits before it retries; -1, never retry, when
// the cost exceeds the quota). Read them with grpc.Trailer.
//
// Other answers, never with the text of an internal error or a credential:
//
//	Unauthenticated   the key function failed for want of a valid
//	                  credential (keyfunc's API key and token errors),
//	                  including a token or an API key too long to read
//	InvalidArgument   the key function failed otherwise (no peer address,
//	                  forwarding metadata over 8 KiB), the key was empty
//	                  or too long, or the call's cost was below 1
//	Unavailable       the limiter could not decide and the failure policy
//	                  is middleware.RefuseOnError (the default), or its
//	                  store failed closed; with retry-after and
//	                  grpc-retry-pushback-ms of WithUnavailableRetryAfter
//
// # Clients
//
// UnaryClientInterceptor and StreamClientInterceptor pace outbound calls
// with a bucket limiter's Reserve, so that a fleet of clients sharing a
// Redis store stays within an upstream API's quota: each call waits its
// turn, and a call whose context ends first gives its slot back.
//
// # go-grpc-middleware
//
// NewMiddlewareLimiter adapts a limiter to go-grpc-middleware v2's
// ratelimit.Limiter, for services built on it. That interceptor rebuilds
// the status from the error's text, so prefer this package's interceptors,
// which send the details.
package grpclimit
