package jwtkey

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/middleware"
)

// TestSubjectThroughMiddleware sends real tokens through the middleware:
// a missing token is a 401 with a Bearer challenge, a forged one a 401
// with error="invalid_token" that does not echo it, and neither reaches
// the limiter; a verified subject is counted under its own key.
func TestSubjectThroughMiddleware(t *testing.T) {
	store, err := memstore.New()
	if err != nil {
		t.Fatal(err)
	}
	lim, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(2))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := middleware.New(lim, middleware.WithKeyFunc(keyfunc.FirstOf(Subject(hmacKey), keyfunc.APIKey("X-API-Key"))))
	if err != nil {
		t.Fatal(err)
	}
	reached := 0
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached++ }))
	valid := sign(t, jwt.SigningMethodHS256, hmacSecret, claimsFor("alice", time.Hour))
	forged := sign(t, jwt.SigningMethodHS256, otherKey, claimsFor("alice", time.Hour))
	tests := []struct {
		name       string
		auth       string
		status     int
		challenges []string
		reached    int
	}{
		{"no token", "", http.StatusUnauthorized, []string{"Bearer", "APIKey"}, 0},
		{"forged token", "Bearer " + forged, http.StatusUnauthorized, []string{`Bearer error="invalid_token"`, "APIKey"}, 0},
		{"valid token", "Bearer " + valid, http.StatusOK, nil, 1},
		{"valid token again", "Bearer " + valid, http.StatusOK, nil, 2},
		{"valid token over the limit", "Bearer " + valid, http.StatusTooManyRequests, nil, 2},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if tt.auth != "" {
			r.Header.Set("Authorization", tt.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != tt.status || reached != tt.reached {
			t.Errorf("%s: status %d, handler reached %d times; want %d, %d", tt.name, rec.Code, reached, tt.status, tt.reached)
		}
		if got := rec.Header().Values("WWW-Authenticate"); fmt.Sprint(got) != fmt.Sprint(tt.challenges) {
			t.Errorf("%s: WWW-Authenticate %q, want %q", tt.name, got, tt.challenges)
		}
		if strings.Contains(rec.Body.String(), "eyJ") {
			t.Errorf("%s: body echoes the token: %s", tt.name, rec.Body)
		}
	}
}
