// Package keyfunc answers "who is asking" for a rate limiter: it turns an
// HTTP request into a key that names the requester, such as the client's IP
// address, a hashed API key, the route or the method. The subject of a
// verified JWT comes from the jwtkey package, a module of its own
// (github.com/redlimit/redlimit/keyfunc/jwtkey), so that a program that
// keys by IP or API key never compiles a JWT library.
//
// A [KeyFunc] has the same shape as httprate's KeyFunc, so functions move
// between the two packages with a plain conversion.
//
// Every key is namespaced by its kind ("ip:", "key:", "sub:", "route:",
// "path:", "method:"), so keys made by different functions never collide,
// and no key made here contains the [Join] separator "|". Parts a client
// controls are bounded in length; those that are too long or hold unusual
// bytes are replaced by a hash, marked by "#" after the namespace, so a
// key stays short and printable whatever the client sends.
//
// Secrets never appear in keys or errors: API keys are hashed with SHA-256
// before use, and bearer tokens are never echoed. Work per request is
// bounded: forwarding headers are examined up to a fixed number of bytes and
// hops, tokens and keys up to a fixed length.
//
// A typical chain keys authenticated callers by who they are and everyone
// else by where they come from:
//
//	key := keyfunc.FirstOf(
//		jwtkey.Subject(verify),
//		keyfunc.APIKey("X-API-Key", keyfunc.KnownAPIKey(isIssuedKey)),
//		keyfunc.IP(keyfunc.TrustProxies(netip.MustParsePrefix("10.0.0.0/8"))),
//	)
//
// [ClientIPIn] reads the client address as [IP] does, for allow-lists of
// networks such as middleware.WithSkip's.
package keyfunc

import (
	"errors"
	"net/http"
)

// KeyFunc returns the rate-limit key for a request, or an error when the
// request does not carry the identity the function looks for.
//
// It has the same underlying type as httprate.KeyFunc: convert with
// httprate.KeyFunc(k) or keyfunc.KeyFunc(k). Plain functions of this shape,
// such as [Route] or httprate.KeyByIP, need no conversion at all.
type KeyFunc func(r *http.Request) (string, error)

// Sentinel errors. Errors returned by this package wrap one of them, so
// callers can branch with errors.Is; a key function configured with an
// invalid value fails with an error wrapping algorithms.ErrInvalidOption
// instead (the constructors that cannot return an error, such as [IP], on
// every request).
var (
	// ErrNoClientIP means no client address could be determined, for
	// example because RemoteAddr does not parse.
	ErrNoClientIP = errors.New("keyfunc: no client IP")

	// ErrNoAPIKey means the API key header is missing or empty.
	ErrNoAPIKey = errors.New("keyfunc: no API key")

	// ErrInvalidAPIKey means an API key was sent but cannot be used: it is
	// too long or the header was sent more than once.
	ErrInvalidAPIKey = errors.New("keyfunc: invalid API key")

	// ErrNoToken means the request carries no bearer token.
	ErrNoToken = errors.New("keyfunc: no bearer token")

	// ErrInvalidToken means a bearer token was sent but did not verify, or
	// verified without a subject. It is never turned into a key.
	ErrInvalidToken = errors.New("keyfunc: invalid token")

	// ErrEmptyKey means a key function returned an empty key without an
	// error. [FirstOf] and [Join] treat that as a failure, since an empty
	// key would put every requester in one bucket.
	ErrEmptyKey = errors.New("keyfunc: empty key")

	// ErrNoKey means none of the functions given to [FirstOf] produced a
	// key; the error also wraps each function's own error.
	ErrNoKey = errors.New("keyfunc: no key function succeeded")
)

// failing returns a KeyFunc that always fails with err: how constructors
// without an error result report a bad configuration without panicking.
func failing(err error) KeyFunc {
	return func(*http.Request) (string, error) { return "", err }
}
