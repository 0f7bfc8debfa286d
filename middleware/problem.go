package middleware

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// newTooMany is the 429 problem for a denial by the named policy.
func newTooMany(policy string) problem {
	return newProblem(http.StatusTooManyRequests, quotaExceededType,
		"The rate limit for this client is exhausted; retry after the number of seconds in Retry-After.",
		[]string{policy})
}

// writeKeyError is the default key error handler: 401 when the request
// lacks a usable credential (keyfunc's token and API key errors), with a
// challenge for each kind of credential that was looked for, and 400 for
// anything else. The error itself stays out of the response: it may quote
// what the client sent.
func (c *config) writeKeyError(w http.ResponseWriter, _ *http.Request, err error) {
	// The problem's own two values, then the challenges: one array that
	// this response alone owns.
	vals := make([]string, 2, 4)
	switch {
	case errors.Is(err, keyfunc.ErrInvalidToken):
		vals = append(vals, challengeInvalidToken)
	case errors.Is(err, keyfunc.ErrNoToken):
		vals = append(vals, challengeBearer)
	}
	if errors.Is(err, keyfunc.ErrNoAPIKey) || errors.Is(err, keyfunc.ErrInvalidAPIKey) {
		vals = append(vals, challengeAPIKey)
	}
	if len(vals) > 2 {
		w.Header()[hdrAuthenticate] = vals[2:len(vals):len(vals)]
		c.unauthorized.write(w, vals[:2:2])
		return
	}
	if errors.Is(err, algorithms.ErrInvalidOption) {
		// The key function itself is misconfigured: the operator must hear
		// of it, though the client still gets a 4xx.
		c.logFailure(err, "", "key function misconfigured")
	}
	c.badKey.write(w, vals[:2:2])
}

// WWW-Authenticate challenges for a 401, which RFC 9110 requires one of:
// Bearer is RFC 6750's; API keys have no registered scheme, so the challenge
// just names the kind of credential.
const (
	challengeBearer       = `Bearer`
	challengeInvalidToken = `Bearer error="invalid_token"`
	challengeAPIKey       = `APIKey`
)

// The problem type of RFC 9457 for an exhausted quota, registered by IANA.
const quotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// The values of the fields every problem response sets.
const (
	noStore            = "no-store"
	problemContentType = "application/problem+json"
)

// problem is a precomputed RFC 9457 response.
type problem struct {
	status     int
	body       []byte
	retryAfter string // set for 503
}

// problemBody is the JSON of a problem, in the order RFC 9457 lists members.
type problemBody struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
}

// newProblem builds the response for status. An empty typ is about:blank,
// whose title is the status's reason phrase.
func newProblem(status int, typ, detail string, policies []string) problem {
	if typ == "" {
		typ = "about:blank"
	}
	body, err := json.Marshal(problemBody{
		Type:             typ,
		Title:            http.StatusText(status),
		Status:           status,
		Detail:           detail,
		ViolatedPolicies: policies,
	})
	if err != nil {
		panic("middleware: " + err.Error()) // strings and ints always marshal
	}
	return problem{status: status, body: body}
}

// write sends the problem. Rate-limit headers already set stay. The
// values it sets are written in vals (Content-Type, Cache-Control, then
// Retry-After when the problem has one), which belong to this response
// alone: one that is edited in place after it is sent changes no other
// response (TestProblemHeaderBytes). When vals has too few slots (nil,
// say), write allocates them.
func (p *problem) write(w http.ResponseWriter, vals []string) {
	if len(vals) < 2 || p.retryAfter != "" && len(vals) < 3 {
		vals = make([]string, 3)
	}
	// No Content-Length: net/http adds it for a body this small, and a
	// ninth header would make the map of a 429 grow past one group.
	h := w.Header()
	vals[0], vals[1] = problemContentType, noStore
	// Three-index slices: a later Add must copy, not write into the next.
	h[hdrContentType] = vals[0:1:1]
	h[hdrCacheControl] = vals[1:2:2]
	if p.retryAfter != "" {
		vals[2] = p.retryAfter
		h[hdrRetryAfter] = vals[2:3:3]
	}
	w.WriteHeader(p.status)
	_, _ = w.Write(p.body) // a client that hung up is no error of ours
}
