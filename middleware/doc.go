// Package middleware rate-limits HTTP requests: it wraps any http.Handler,
// so it mounts on http.ServeMux and on chi alike.
//
// For each request it derives a key (who is asking) with a keyfunc.KeyFunc,
// asks an algorithms.Limiter for a decision within a bounded time, and then
// either passes the request on or answers 429 Too Many Requests.
//
//	known := keyfunc.KnownAPIKey(func(raw string) bool { return keys.Valid(raw) })
//	mw, err := middleware.New(limiter,
//		middleware.WithKeyFunc(keyfunc.FirstOf(keyfunc.APIKey("X-API-Key", known), keyfunc.IP())),
//	)
//	if err != nil {
//		log.Fatal(err) // a misconfiguration, such as a nil option
//	}
//	mux.Handle("/search", mw(searchHandler))   // net/http
//	r.With(mw).Get("/search", search)          // chi
//
// New and NewConcurrency return an error (wrapping algorithms.ErrInvalidOption) for
// configuration that no request could be served with, so that a mistake
// shows at start-up rather than on every request in production. They
// return errors rather than panic because configuration is also built
// from files (package config) at run time, and algorithms.New, which
// makes the limiter, returns errors too. Only wrapping a nil handler
// panics, as http.ServeMux.Handle does: the wrapping function has no
// error to return.
//
// Key by an API key only with keyfunc.KnownAPIKey (or behind the handler
// that authenticates keys): otherwise a client that makes up a key for
// every request gets a fresh quota for every request.
//
// # Headers
//
// Every response the limiter decided on carries, on passes and on denials:
//
//	X-RateLimit-Limit: 100        the quota (Result.Limit)
//	X-RateLimit-Remaining: 42     what is left, never negative
//	X-RateLimit-Reset: 1767225600 when the quota is whole again: UTC epoch
//	                              seconds, rounded up (GitHub's meaning), or
//	                              seconds from now with WithResetMode(ResetDelta)
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=42;t=17
//
// The last two are the Structured Fields of the IETF draft
// draft-ietf-httpapi-ratelimit-headers-11: q is the quota, w the window in
// whole seconds (rounded up, at least 1), r the remaining quota and t the
// seconds, rounded up, until the quota is whole again. On a denial t is
// instead the Retry-After value, so that Retry-After never points earlier
// than t, as the draft asks. WithLegacyHeaders and WithIETFHeaders turn
// either family off; WithPolicyName names the policy.
//
// # Statuses
//
// The middleware answers with RFC 9457 problem details
// (application/problem+json, Cache-Control: no-store) in these cases, and
// never with the text of an internal error:
//
//	429 Too Many Requests   the limit is exhausted; Retry-After in whole
//	                        seconds, rounded up, at least 1; the problem type
//	                        is the IANA quota-exceeded type with
//	                        "violated-policies"
//	401 Unauthorized        the key function failed for want of a valid
//	                        credential (keyfunc's credential errors); with
//	                        WWW-Authenticate; 429 instead once the client's
//	                        quota of failed credentials is spent
//	400 Bad Request         the key function failed otherwise, the key was
//	                        empty or too long, or the request's cost is below 1
//	413 Content Too Large   the request's cost exceeds the whole quota, so it
//	                        could never pass
//	503 Service Unavailable the limiter returned an error under RefuseOnError,
//	                        or its store failed closed; Retry-After 1
//	                        (WithUnavailableRetryAfter)
//
// # Failures
//
// Each decision gets its own deadline (WithTimeout, 100 ms by default). A
// limiter made by algorithms.New on a Redis store never fails for want of
// Redis: its store decides by its own failure mode (redisstore.FailLocal,
// the default, counts in memory), and the middleware answers by the
// Result's Decider: a local decision like any other, with its headers;
// algorithms.DecidedFailOpen passes the request on without rate-limit
// headers; algorithms.DecidedFailClosed answers 503.
//
// A limiter that returns an error (one of your own, say) is handled here:
// the optional fallback limiter (WithFallback) decides instead; when there
// is none, or it fails too, the error policy applies: RefuseOnError (the
// default) answers 503, PassOnError passes the request on without rate-limit
// headers, with no limit at all. A breaker (WithBreakFor) stops asking a
// limiter that keeps failing, so an outage does not cost every request the
// whole timeout. Failures are logged with log/slog, at most once a second
// per middleware, with a short keyed hash of the key instead of the key.
//
// # Failed credentials
//
// A request whose key function fails for want of a valid credential
// (keyfunc's API key and token errors) is not refused outright: it is first
// charged to the client's address (WithCredentialFailureKey, keyfunc.IP()
// by default) under the route's limiter, in a namespace of its own. While
// that quota lasts the answer is 401; after it, 429. So guessing keys or
// tokens is rate-limited like anything else, without touching the quota of
// the credentials' owners. WithCountCredentialFailures(false) turns it off.
//
// # Per-route limits
//
// Each route counts apart: the middleware prefixes the key with the route
// pattern that matched (chi's, or http.ServeMux's), so two routes never
// share a counter, whether their limiters are alike or one and the same,
// while every instance of the application shares each route's counter.
// Inside r.Route(..., func(r chi.Router) { r.Use(mw) }) the pattern known
// is the group's, so the group counts as one. WithRouteScope(false) counts
// everything a middleware sees under the key alone.
//
// # Requests in flight
//
// NewConcurrency limits how many requests per key run at once
// (algorithms.NewConcurrency), with the same key functions and problem
// responses: it holds a lease while the handler runs and answers 429 with
// RateLimit-Policy's qu="concurrent-requests" over the limit. Mount it
// inside a rate limit.
//
// # Charging by outcome
//
// WithChargeIf counts only the responses whose status a predicate selects
// (only failures, for a login route), and WithCostAfter lets the handler
// set the final cost with SetCost. Either way the cost is reserved before
// the handler runs, so slow requests never pass more than the limit while
// they run, and settled after it: given back (refunder) or
// charged further (algorithms.RateLimiter.Charge, never refused: what is left when
// the rest is more). Headers come from the reservation.
//
// # Exemptions
//
// WithSkip passes the requests a predicate selects without a decision, a
// count or headers: health checks, or an allow-list of networks read with
// keyfunc.ClientIPIn. It is a trust decision: never base it on what a
// client sends, such as a header no trusted proxy wrote.
package middleware
