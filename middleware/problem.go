package middleware

import (
	"encoding/json"
	"errors"
	"net/http"

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
	var challenges []string
	switch {
	case errors.Is(err, keyfunc.ErrInvalidToken):
		challenges = challengeInvalidToken
	case errors.Is(err, keyfunc.ErrNoToken):
		challenges = challengeBearer
	}
	if errors.Is(err, keyfunc.ErrNoAPIKey) || errors.Is(err, keyfunc.ErrInvalidAPIKey) {
		if challenges == nil {
			challenges = challengeAPIKey
		} else {
			challenges = append(challenges[:1:1], challengeAPIKey...)
		}
	}
	if challenges != nil {
		w.Header()[hdrAuthenticate] = challenges
		c.unauthorized.write(w)
		return
	}
	if errors.Is(err, keyfunc.ErrInvalidOption) {
		// The key function itself is misconfigured: the operator must hear
		// of it, though the client still gets a 4xx.
		c.logFailure(err, "", "key function misconfigured")
	}
	c.badKey.write(w)
}

// WWW-Authenticate challenges for a 401, which RFC 9110 requires one of:
// Bearer is RFC 6750's; API keys have no registered scheme, so the challenge
// just names the kind of credential.
var (
	challengeBearer       = []string{`Bearer`}
	challengeInvalidToken = []string{`Bearer error="invalid_token"`}
	challengeAPIKey       = []string{`APIKey`}
)

// The problem type of RFC 9457 for an exhausted quota, registered by IANA.
const quotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// Shared header values. They are only ever assigned whole to a header map,
// with no spare capacity, so nothing writes into them.
var (
	noStore            = []string{"no-store"}
	problemContentType = []string{"application/problem+json"}
)

// problem is a precomputed RFC 9457 response.
type problem struct {
	status     int
	body       []byte
	retryAfter []string // set for 503
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

// write sends the problem. Rate-limit headers already set stay.
func (p *problem) write(w http.ResponseWriter) {
	// No Content-Length: net/http adds it for a body this small, and a
	// ninth header would make the map of a 429 grow past one group.
	h := w.Header()
	h[hdrContentType] = problemContentType
	h[hdrCacheControl] = noStore
	if p.retryAfter != nil {
		h[hdrRetryAfter] = p.retryAfter
	}
	w.WriteHeader(p.status)
	_, _ = w.Write(p.body) // a client that hung up is no error of ours
}
