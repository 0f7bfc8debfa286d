package jwtkey

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/redlimit/redlimit/keyfunc"
)

func constKey(k string) keyfunc.KeyFunc { return func(*http.Request) (string, error) { return k, nil } }

// A verified subject wins a keyfunc.FirstOf chain; a token that does not
// verify falls through to the next function.
func TestFirstOfWithSubject(t *testing.T) {
	const secret = "sk_live_0123456789abcdef0123456789abcdef"
	chain := keyfunc.FirstOf(Subject(hmacKey), keyfunc.APIKey("X-API-Key"), keyfunc.IP())
	validToken := sign(t, jwt.SigningMethodHS256, hmacSecret, claimsFor("alice", time.Hour))
	expiredToken := sign(t, jwt.SigningMethodHS256, hmacSecret, claimsFor("alice", -time.Hour))

	tests := []struct {
		name   string
		remote string
		header map[string][]string
		want   string
	}{
		{"token wins", "203.0.113.7:1", map[string][]string{"Authorization": {"Bearer " + validToken}, "X-Api-Key": {secret}}, "sub:alice"},
		{"API key next", "203.0.113.7:1", map[string][]string{"X-Api-Key": {secret}}, "key:" + keyfunc.HashAPIKey(secret)},
		{"keyfunc.IP last", "203.0.113.7:1", nil, "ip:203.0.113.7"},
		{"expired token falls through", "203.0.113.7:1", map[string][]string{"Authorization": {"Bearer " + expiredToken}}, "ip:203.0.113.7"},
		{"forged token falls through", "203.0.113.7:1", map[string][]string{"Authorization": {"Bearer " + forgeSubject(t, validToken, "bob")}}, "ip:203.0.113.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := chain(newRequest(tt.remote, tt.header))
			if err != nil || got != tt.want {
				t.Errorf("keyfunc.FirstOf() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestFirstOfWithSubjectAllFail(t *testing.T) {
	const secret = "sk_live_0123456789abcdef0123456789abcdef"
	token := sign(t, jwt.SigningMethodHS256, otherKey, claimsFor("alice", time.Hour))
	r := newRequest("bogus", map[string][]string{
		"Authorization": {"Bearer " + token},
		"X-Api-Key":     {secret + strings.Repeat("x", 256)}, // past the longest API key APIKey takes
	})
	got, err := keyfunc.FirstOf(Subject(hmacKey), keyfunc.APIKey("X-API-Key"), keyfunc.IP(), constKey(""))(r)
	if err == nil || got != "" {
		t.Fatalf("keyfunc.FirstOf() = %q, %v; want an error", got, err)
	}
	for _, want := range []error{keyfunc.ErrNoKey, keyfunc.ErrInvalidToken, jwt.ErrTokenSignatureInvalid, keyfunc.ErrInvalidAPIKey, keyfunc.ErrNoClientIP, keyfunc.ErrEmptyKey} {
		if !errors.Is(err, want) {
			t.Errorf("error %q does not wrap %q", err, want)
		}
	}
	text := err.Error()
	if strings.Contains(text, secret) || strings.Contains(text, token) || strings.Contains(text, strings.Split(token, ".")[2]) {
		t.Errorf("error text %q holds a secret", text)
	}
	if strings.Contains(text, "\n") {
		t.Errorf("error text %q spans lines", text)
	}
}

// TestSubjectNamespace checks that Subject keeps to "sub:" and never emits
// keyfunc's Join separator or its escape, whatever the subject, so that
// its keys never collide with another key function's.
func TestSubjectNamespace(t *testing.T) {
	odd := []string{"a|b", "a%b", "#x", "ip:1.2.3.4", "key:abc", strings.Repeat("é", 300), "sub:alice", "\x00\xff"}
	kf := Subject(hmacKey)
	seen := map[string]bool{}
	for _, s := range odd {
		key, err := kf(bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, claimsFor(s, time.Hour))))
		if err != nil {
			t.Fatalf("subject %q: %v", s, err)
		}
		if !strings.HasPrefix(key, "sub:") || strings.ContainsAny(key, "|%") {
			t.Errorf("subject %q: key %q outside sub: or holding '|' or '%%'", s, key)
		}
		seen[key] = true
	}
	if len(seen) != len(odd) {
		t.Errorf("%d distinct keys from %d subjects", len(seen), len(odd))
	}
}
