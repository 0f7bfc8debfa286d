package httpratecounter

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/httprate"

	"github.com/redlimit/redlimit/keyfunc"
)

// Options are the httprate options that plug the Counter in: its counts
// (WithLimitCounter), its answers to errors (WithErrorHandler with
// ErrorHandler) and a limit handler that leaves alone what ErrorHandler
// answered (WithLimitHandler with LimitHandler(nil)). Pass a custom limit
// handler after them as httprate.WithLimitHandler(c.LimitHandler(yours)).
func (c *Counter) Options() []httprate.Option {
	return []httprate.Option{
		httprate.WithLimitCounter(c),
		httprate.WithErrorHandler(c.ErrorHandler),
		httprate.WithLimitHandler(c.LimitHandler(nil)),
	}
}

// answeredHeader marks, in the header map of a response that ErrorHandler
// has written, that the request is answered. It is set after WriteHeader,
// so it is never sent (net/http ignores later header changes); it tells
// LimitHandler not to write a second answer.
const answeredHeader = "X-Httpratecounter-Answered"

// ErrorHandler answers the errors httprate hands to its error handler, for
// httprate.WithErrorHandler (see Options). Without it httprate answers
// every error with 428 Precondition Required and the error's text, which
// would show clients Redis's addresses and errors. When a counter call
// fails, httprate calls its limit handler right after its error handler,
// on the same response; so ErrorHandler writes its answer only for errors
// that are not a denial, and LimitHandler then writes nothing more:
//
//	429 Too Many Requests    ErrLimitExceeded (WithStrictLimit refused the
//	                         increment): ErrorHandler only sets Retry-After
//	                         (the window in whole seconds, rounded up, at
//	                         least 1, as httprate's own 429) and
//	                         X-RateLimit-Remaining: 0, and the limit
//	                         handler that follows answers, yours included
//	503 Service Unavailable  ErrUnavailable: Redis could not count;
//	                         Retry-After: 1. The request is not passed
//	                         (httprate cannot pass a request on error)
//	500 Internal Server Error ErrMisconfigured: a programming error, which
//	                         Err reports at start
//	401 Unauthorized         a keyfunc credential error (no or an invalid
//	                         bearer token or API key) from the key
//	                         function, which httprate hands here too; with
//	                         WWW-Authenticate, as package middleware answers
//	400 Bad Request          any other error: the key function's, for a
//	                         request whose key cannot be found
//
// The answers are RFC 9457 problem details, never the error's text.
func (c *Counter) ErrorHandler(w http.ResponseWriter, _ *http.Request, err error) {
	h := w.Header()
	switch {
	case errors.Is(err, ErrLimitExceeded):
		window := time.Duration(0)
		if cfg := c.cfg.Load(); cfg != nil {
			window = cfg.window
		}
		h.Set("Retry-After", strconv.FormatInt(wholeSeconds(window), 10))
		h.Set("X-RateLimit-Remaining", "0")
		return
	case errors.Is(err, ErrUnavailable):
		h.Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, "", "The rate limiter cannot decide at the moment; retry shortly.")
	case errors.Is(err, ErrMisconfigured):
		writeProblem(w, http.StatusInternalServerError, "", "The rate limiter is misconfigured.")
	case errors.Is(err, keyfunc.ErrNoToken) || errors.Is(err, keyfunc.ErrInvalidToken) ||
		errors.Is(err, keyfunc.ErrNoAPIKey) || errors.Is(err, keyfunc.ErrInvalidAPIKey):
		h.Set("WWW-Authenticate", challenge(err))
		writeProblem(w, http.StatusUnauthorized, "", "The request lacks a valid credential, which identifies its client to the rate limiter.")
	default:
		writeProblem(w, http.StatusBadRequest, "", "The request does not identify its client as the rate limiter requires.")
	}
	h.Set(answeredHeader, "1")
}

// LimitHandler returns the limit handler for httprate.WithLimitHandler: it
// calls next (nil: a 429 problem+json) unless ErrorHandler has already
// answered the request, which httprate would otherwise follow with a 429
// body of its own.
func (c *Counter) LimitHandler(next http.HandlerFunc) http.HandlerFunc {
	if next == nil {
		next = func(w http.ResponseWriter, _ *http.Request) {
			writeProblem(w, http.StatusTooManyRequests, quotaExceededType,
				"The rate limit for this client is exhausted; retry after the number of seconds in Retry-After.")
		}
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if w.Header().Get(answeredHeader) != "" {
			return
		}
		next(w, r)
	}
}

// challenge is the WWW-Authenticate value for a keyfunc credential error:
// Bearer for a token, APIKey (no registered scheme; it names the kind of
// credential) for an API key.
func challenge(err error) string {
	switch {
	case errors.Is(err, keyfunc.ErrInvalidToken):
		return `Bearer error="invalid_token"`
	case errors.Is(err, keyfunc.ErrNoToken):
		return "Bearer"
	}
	return "APIKey"
}

// wholeSeconds is d in whole seconds, rounded up, at least 1.
func wholeSeconds(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}

// The problem type of RFC 9457 for an exhausted quota, registered by IANA.
const quotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// writeProblem sends an RFC 9457 problem; typ "" is about:blank, whose
// title is the status's reason phrase.
func writeProblem(w http.ResponseWriter, status int, typ, detail string) {
	if typ == "" {
		typ = "about:blank"
	}
	body, _ := json.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{typ, http.StatusText(status), status, detail}) // strings and an int always marshal
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body) // a client that hung up is no error of ours
}
