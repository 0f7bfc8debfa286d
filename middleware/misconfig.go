package middleware

import (
	"context"
	"log/slog"
	"net/http"
)

// misconfigured logs err, with the logger among opts if there is one, and
// returns middleware that answers every request 500.
func misconfigured(err error, opts []Option) func(http.Handler) http.Handler {
	logger := slog.Default()
	for _, o := range opts {
		if o != nil {
			var c config
			o(&c)
			if c.logger != nil {
				logger = c.logger
			}
		}
	}
	logger.LogAttrs(context.Background(), slog.LevelError,
		"redlimit: middleware misconfigured: every request gets 500", slog.Any("error", err))
	return func(http.Handler) http.Handler { return misconfiguredHandler }
}

// misconfiguredHandler answers every request of a middleware no request can
// be served with: 500, naming nothing internal.
var misconfiguredHandler = func() http.Handler {
	p := newProblem(http.StatusInternalServerError, "", "The rate limiter is misconfigured.", nil)
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { p.write(w) })
}()
