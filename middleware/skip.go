package middleware

import "net/http"

// WithSkip exempts the requests for which skip returns true: they pass on
// to the next handler at once, without a decision, without a count and
// without rate-limit headers, before the key function runs (so a health
// check needs no credential). The Observer hears OutcomeSkipped.
//
// Exempting is a trust decision: a client that can make skip return true
// is not limited at all. Base it only on what a client cannot forge: the
// route or path the server matched, or the client's address as
// keyfunc.ClientIPIn reads it (RemoteAddr, or forwarding headers only from
// keyfunc.TrustProxies' proxies). Never base it on a header, query
// parameter or cookie the client sends, nor on a forwarding header that no
// trusted proxy wrote.
//
// skip runs on every request, so it must be fast and safe for concurrent
// use. A nil skip is refused: New returns an error wrapping
// algorithms.ErrInvalidOption.
func WithSkip(skip func(*http.Request) bool) Option {
	return func(c *config) {
		c.skip, c.skipNil = skip, skip == nil
	}
}

// skipped is the first step: it reports whether WithSkip exempts r, which
// then passes on as if no middleware were there.
func (c *config) skipped(r *http.Request) bool {
	if c.skip == nil || !c.skip(r) {
		return false
	}
	c.observe(OutcomeSkipped, "", 0)
	return true
}
