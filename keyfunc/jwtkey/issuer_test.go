package jwtkey

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// A key function that hands out a public key's PEM for an HMAC token (as
// one that returns "the key bytes" whatever the algorithm does) must not let
// a client sign an HS256 token with that public key.
func TestJWTAlgorithmConfusion(t *testing.T) {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	keyFunc := func(t *jwt.Token) (any, error) {
		if _, ok := t.Method.(*jwt.SigningMethodRSA); ok {
			return &priv.PublicKey, nil
		}
		return pemBytes, nil
	}
	for _, kf := range []keyfunc.KeyFunc{Subject(keyFunc), IssuerSubject(keyFunc)} {
		claims := jwt.RegisteredClaims{Issuer: "https://idp.example", Subject: "alice", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}
		forged := sign(t, jwt.SigningMethodHS256, pemBytes, claims)
		if key, err := kf(bearer(forged)); !errors.Is(err, keyfunc.ErrInvalidToken) || !errors.Is(err, jwt.ErrInvalidKeyType) {
			t.Errorf("HS256 signed with the public key's PEM: %q %v, want keyfunc.ErrInvalidToken and ErrInvalidKeyType", key, err)
		}
		genuine := sign(t, jwt.SigningMethodRS256, priv, claims)
		if _, err := kf(bearer(genuine)); err != nil {
			t.Errorf("the genuine RS256 token: %v", err)
		}
	}
}

func TestJWTIssuerSubject(t *testing.T) {
	kf := IssuerSubject(hmacKey)
	claims := func(iss, sub string) jwt.RegisteredClaims {
		c := claimsFor(sub, time.Hour)
		c.Issuer = iss
		return c
	}
	key := func(c jwt.RegisteredClaims) (string, error) {
		return kf(bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, c)))
	}
	a, err := key(claims("https://a.example", "alice"))
	if err != nil || a != "iss:https://a.example,sub:alice" {
		t.Fatalf("issuer a: %q %v", a, err)
	}
	b, err := key(claims("https://b.example", "alice"))
	if err != nil || b == a {
		t.Fatalf("issuer b: %q %v, want a key of its own", b, err)
	}
	// Parts that could run together are hashed, and never collide with
	// the readable form.
	odd, err := key(claims("https://a.example,sub:x", "y"))
	if err != nil || !strings.HasPrefix(odd, "isub:#") || len(odd) != len("isub:#")+32 {
		t.Fatalf("issuer with a comma: %q %v", odd, err)
	}
	if _, err := key(claims("", "alice")); !errors.Is(err, keyfunc.ErrInvalidToken) {
		t.Fatalf("no issuer: %v, want keyfunc.ErrInvalidToken", err)
	}
	if _, err := NewIssuerSubject(nil); !errors.Is(err, algorithms.ErrInvalidOption) {
		t.Fatalf("nil key function: %v", err)
	}
}
