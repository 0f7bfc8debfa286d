package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
)

// operatorPrefix is where the operator handler is served.
const operatorPrefix = "/ops"

// mountOperator serves the operator handler that newOps makes under
// operatorPrefix, to requests with "Authorization: Bearer <token>" only;
// it makes and serves nothing when token is empty.
func mountOperator(r chi.Router, token string, newOps func() (http.Handler, error)) error {
	if token == "" {
		return nil
	}
	ops, err := newOps()
	if err != nil {
		return err
	}
	r.Mount(operatorPrefix, requireToken(token, http.StripPrefix(operatorPrefix, ops)))
	return nil
}

// requireToken passes on requests that bear token, and answers 401 to the
// rest. The comparison takes the same time whatever the guess: both sides
// are hashed first, so not even the token's length shows.
func requireToken(token string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="operator"`)
			http.Error(w, "operator token required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
