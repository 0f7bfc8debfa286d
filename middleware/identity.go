package middleware

import (
	"errors"
	"net/http"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// identify is the step that finds who is asking: it returns the key r is
// counted under, or answers r (or, in shadow mode, lets it pass) when there
// is none.
func (c *config) identify(w http.ResponseWriter, r *http.Request) (string, action) {
	key, err := c.keyFunc(r)
	switch {
	case err != nil && c.shadow:
		c.observe(OutcomeKeyError, "", 0)
		return "", passOn
	case err != nil:
		c.credentialFailed(w, r, err)
		return "", answered
	case key == "":
		// Refused here, before the route scope would make it look like a
		// key.
		return "", c.refuse(w, &c.badKey, "", 0)
	}
	return key, proceed
}

// credentialNamespace prefixes the keys failed credentials are charged
// under, so they never share a counter with the same client's requests.
const credentialNamespace = "authfail|"

// isCredentialError reports whether the key function failed for want of a
// valid credential: a missing, unknown or invalid API key or token.
func isCredentialError(err error) bool {
	return errors.Is(err, keyfunc.ErrNoAPIKey) || errors.Is(err, keyfunc.ErrInvalidAPIKey) ||
		errors.Is(err, keyfunc.ErrNoToken) || errors.Is(err, keyfunc.ErrInvalidToken)
}

// credentialFailed answers a request whose key function failed. A
// credential failure is first charged to the client under the route's
// limiter: once that quota is spent the answer is 429, so credentials
// cannot be guessed faster than the limit. Anything else, or a failure
// that cannot be charged (no client key, the limiter failing), gets the
// key error handler's answer, which refuses the request all the same.
func (c *config) credentialFailed(w http.ResponseWriter, r *http.Request, err error) {
	c.observe(OutcomeKeyError, "", 0)
	if !c.countCredentialFailures || !isCredentialError(err) {
		c.keyError(w, r, err)
		return
	}
	client, kerr := c.credentialKey(r)
	if kerr != nil || client == "" {
		c.keyError(w, r, err)
		return
	}
	key := credentialNamespace + client
	if c.routeScope {
		key = c.scoped(r, key)
	}
	var t readings
	d, res, derr := c.askGuarded(r.Context(), c.limiter, key, 1, 0, &t)
	if derr != nil || res.Allowed || res.Decider == algorithms.DecidedFailClosed {
		c.keyError(w, r, err)
		return
	}
	ht := headerTextOf(d)
	c.setHeaders(w.Header(), res, ht, c.mainPolicies, &t)
	c.writeDenied(w, r, res, c.mainPolicies, ht)
}
