package jwtkey_test

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/keyfunc/jwtkey"
)

// Only a verified token names the requester.
func ExampleSubject() {
	secret := []byte("an HMAC secret of at least 32 bytes")
	key := jwtkey.Subject(
		func(*jwt.Token) (any, error) { return secret, nil },
		jwt.WithValidMethods([]string{"HS256"}),
		jwt.WithIssuer("https://auth.example"),
		jwt.WithLeeway(5*time.Second),
	)

	claims := jwt.RegisteredClaims{
		Subject:   "user-42",
		Issuer:    "https://auth.example",
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
	}
	token, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)

	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	fmt.Println(key(r))

	forged, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte("a guess at the secret"))
	r.Header.Set("Authorization", "Bearer "+forged)
	_, err := key(r)
	fmt.Println(errors.Is(err, keyfunc.ErrInvalidToken))
	// Output:
	// sub:user-42 <nil>
	// true
}

// Authenticated callers are keyed by who they are, everyone else by where
// they come from.
func ExampleSubject_firstOf() {
	secret := []byte("an HMAC secret of at least 32 bytes")
	key := keyfunc.FirstOf(
		jwtkey.Subject(func(*jwt.Token) (any, error) { return secret, nil }),
		keyfunc.APIKey("X-API-Key", keyfunc.KnownAPIKey(func(raw string) bool { return raw == "sk_live_abc123" })),
		keyfunc.IP(),
	)

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "203.0.113.9:1234"
	fmt.Println(key(r))

	r.Header.Set("Authorization", "Bearer not.a.token") // falls through
	fmt.Println(key(r))

	// A per-route limit for each caller.
	perRoute := keyfunc.Join(keyfunc.Route, key)
	fmt.Println(perRoute(r))
	// Output:
	// ip:203.0.113.9 <nil>
	// ip:203.0.113.9 <nil>
	// path:/|ip:203.0.113.9 <nil>
}
