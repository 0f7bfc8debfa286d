// Package httpratecounter keeps the counts of github.com/go-chi/httprate in
// Redis, so that every instance of a service shares one limit: a Counter
// is an httprate.LimitCounter for httprate.WithLimitCounter, on any
// redis.UniversalClient (a single server, Sentinel or Cluster).
//
//	c, err := httpratecounter.New(client)
//	...
//	r.Use(httprate.LimitBy(100, time.Minute, keyFn, c.Options()...))
//	if err := c.Err(); err != nil { ... } // a limit or window that cannot work
//
// Options is httprate.WithLimitCounter(c) with the Counter's error and
// limit handlers, which answer its errors without internals (see
// ErrorHandler).
//
// # Keys
//
// httprate counts per key and per window, and weighs the previous window's
// count by the share of it still within one window of now. A Counter keeps
// each count in a Redis string named
//
//	<prefix>:{<first 128 bits of SHA-256(httprate key), hex>}:<window start, µs since the Unix epoch>
//
// The hash keeps the httprate key, which may be an API key as readily as
// an IP, out of Redis, and keeps any client from choosing a key that
// shares another's count. The braces make the hash the Cluster hash tag,
// so both windows of one client live in one slot and one MGET or one
// script reads them on Cluster too. Each increment renews the counter's
// expiry to two windows and a second, on Redis's clock: the counter is
// read for the window it counts and the next one, and then disappears.
//
// go-redis sends a call again when its reply was lost (a broken connection,
// a read timeout), after the first may have run. So each increment carries
// an id, and its script keeps its reply for a few seconds under
// <prefix>:{<hash>}:once:<id>: a call sent again returns that reply and
// counts nothing. A Client with MaxRetries -1 never resends, and its
// increments keep nothing.
//
// While a Cluster slot migrates (a reshard), Redis serves a command only
// when one node holds all its keys, or none and it has one key. A
// client's increments then go without the id (a resend after a lost reply
// may count twice) and Get reads its two counters with a GET each; a
// checked increment (WithStrictLimit) is refused while the two counters
// lie on different nodes or on neither.
//
// # What is atomic
//
// httprate asks a counter two questions per request, in order: Get (the
// counts of the current and previous window), then, if its own arithmetic
// on those counts admits the request, IncrementBy. Each call is one Redis
// command or script, atomic by itself. Within one process httprate holds
// one lock per limiter across both calls, so no request of that limiter
// slips between another's check and its increment (the price: that
// limiter's requests reach Redis one at a time, two round trips each).
//
// Across instances nothing in httprate's interface ties the two calls
// together: the counter learns neither the decision nor the request's own
// limit, so N instances can each read the same count before any of them
// increments it. Each admitted request read, at its check, a weighted count
// of at most limit-cost; the increments that land after the latest such
// check come from requests already checked, at most one per instance. So
// the weighted count, rounded as httprate rounds it, never exceeds
// limit + (N-1)×cost: in one fresh window, at most N-1 requests over the
// limit pass, and the excess makes later requests wait for it. This bound holds with the Counter's default
// behaviour; its tests measure it with four instances of fifty goroutines
// each on one key.
//
// WithStrictLimit removes the excess. IncrementBy then runs a script that
// recomputes httprate's weighted count from both windows' counters and adds
// the amount only if the rounded count plus the amount is within the
// limit, in one step; otherwise it writes nothing and returns
// ErrLimitExceeded. No number of instances then passes the limit together.
// The price of the interface is that httprate sees a refused increment as
// an error, not as a denial: with Options, ErrorHandler adds Retry-After
// and the limit handler httprate calls next answers 429. The check uses the limit httprate passed to Config; a per-request
// limit (httprate.WithRequestLimit) above it is capped at it, one below it
// is checked by httprate alone, as without the option.
//
// # Whose clock
//
// httprate names windows by its own clock and passes them to both calls,
// and Get and IncrementBy must agree on the keys, so the Counter uses the
// windows it is given: servers whose clocks disagree by more than a small
// share of the window count partly in different windows. What the
// interface leaves to the counter runs on Redis's clock: each counter's
// expiry, and, under WithStrictLimit, the weight of the previous window
// (the share of the current window gone by is Redis's time minus the
// window's start, clamped to the window). httprate's own check weighs the
// counts by its server's clock; that part the counter cannot change.
//
// # When Redis fails
//
// Every call is bounded by WithTimeout (DefaultTimeout), whatever the
// go-redis client's own timeouts, because httprate holds its lock across
// the call: each request of a limiter waits for the calls of the one
// before. For the same reason a circuit breaker stops asking Redis after
// five consecutive failures (or half the calls of a second, from twenty
// calls), for half a second, then lets one call probe; meanwhile calls fail
// at once instead of one per timeout. A failure, a timeout or a reply that is not a count is returned
// to httprate wrapping ErrUnavailable; nothing falls back to a local count
// in silence. httprate then calls its error handler and does not pass the
// request: limiting with httprate and this counter fails closed. httprate's
// default error handler answers 428 with the error's text, and its limit
// handler then appends a 429's text; with Options, ErrorHandler answers 503
// with Retry-After: 1 and no internals, and nothing follows. A call given up on at its timeout may still complete in
// Redis, so a request refused for a timeout may have been counted.
//
// It is a module of its own, github.com/redlimit/redlimit/httpratecounter, so that
// only the programs that use it compile httprate.
package httpratecounter
