package jwtkey

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/redlimit/redlimit/internal/keytext"
)

// FuzzSubject feeds arbitrary bearer tokens to Subject and checks
// every key it returns against an independent HS256 verification.
func FuzzSubject(f *testing.F) {
	far := jwt.NewNumericDate(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
	f.Add(sign(f, jwt.SigningMethodHS256, hmacSecret, jwt.RegisteredClaims{Subject: "alice", ExpiresAt: far}))
	f.Add(sign(f, jwt.SigningMethodHS256, hmacSecret, jwt.RegisteredClaims{Subject: "auth0|42", ExpiresAt: far}))
	f.Add(sign(f, jwt.SigningMethodHS256, otherKey, jwt.RegisteredClaims{Subject: "alice", ExpiresAt: far}))
	f.Add(sign(f, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.RegisteredClaims{Subject: "alice", ExpiresAt: far}))
	f.Add("a.b.c")
	f.Add("")

	kf := Subject(hmacKey)
	f.Fuzz(func(t *testing.T, token string) {
		r := newRequest("", map[string][]string{"Authorization": {"Bearer " + token}})
		key, err := kf(r)
		if err != nil {
			if key != "" {
				t.Fatalf("key %q returned with error %v", key, err)
			}
			if len(token) >= 16 && strings.Contains(err.Error(), token) {
				t.Fatalf("error %q holds the token", err)
			}
			return
		}
		sub, ok := verifyHS256(strings.TrimLeft(token, " "))
		if !ok {
			t.Fatalf("token %q gave key %q but does not verify", token, key)
		}
		if want := keytext.Namespaced("sub:", sub, maxSubjectLen, isIdentByte); key != want {
			t.Fatalf("key %q, want %q", key, want)
		}
	})
}

// verifyHS256 checks an HS256 token by hand and returns its subject.
func verifyHS256(token string) (string, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", false
	}
	dec := base64.RawURLEncoding // jwt decodes leniently unless told otherwise
	head, err1 := dec.DecodeString(parts[0])
	body, err2 := dec.DecodeString(parts[1])
	sig, err3 := dec.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return "", false
	}
	var h struct {
		Alg string `json:"alg"`
	}
	var c struct {
		Sub string  `json:"sub"`
		Exp float64 `json:"exp"`
	}
	if json.Unmarshal(head, &h) != nil || h.Alg != "HS256" || json.Unmarshal(body, &c) != nil {
		return "", false
	}
	mac := hmac.New(sha256.New, hmacSecret)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if !hmac.Equal(mac.Sum(nil), sig) || c.Sub == "" || c.Exp < float64(time.Now().Unix()) {
		return "", false
	}
	return c.Sub, true
}
