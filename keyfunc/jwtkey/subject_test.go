package jwtkey

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

var (
	hmacSecret = []byte("test secret: 32 bytes or longer!")
	otherKey   = []byte("some other secret, also 32 bytes")
)

func hmacKey(*jwt.Token) (any, error) { return hmacSecret, nil }

func sign(t testing.TB, method jwt.SigningMethod, key any, claims jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func claimsFor(sub string, exp time.Duration) jwt.RegisteredClaims {
	return jwt.RegisteredClaims{Subject: sub, ExpiresAt: jwt.NewNumericDate(time.Now().Add(exp))}
}

func bearer(token string) *http.Request {
	return newRequest("203.0.113.7:1", map[string][]string{"Authorization": {"Bearer " + token}})
}

func TestJWTSubject(t *testing.T) {
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	valid := sign(t, jwt.SigningMethodHS256, hmacSecret, claimsFor("alice", time.Hour))
	now := time.Now()

	tests := []struct {
		name    string
		req     *http.Request
		opts    []jwt.ParserOption
		keyFunc jwt.Keyfunc
		want    string
		wantErr []error // all must match when want is ""
	}{
		{name: "valid HS256", req: bearer(valid), want: "sub:alice"},
		{name: "lower-case scheme", req: newRequest("", map[string][]string{"Authorization": {"bearer " + valid}}), want: "sub:alice"},
		{name: "extra spaces", req: newRequest("", map[string][]string{"Authorization": {"Bearer    " + valid}}), want: "sub:alice"},
		{name: "valid ES256", req: bearer(sign(t, jwt.SigningMethodES256, ecKey, claimsFor("bob", time.Hour))),
			keyFunc: func(*jwt.Token) (any, error) { return &ecKey.PublicKey, nil }, want: "sub:bob"},
		{name: "e-mail subject verbatim", req: bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, claimsFor("a.b+c@example.com", time.Hour))),
			want: "sub:a.b+c@example.com"},
		{name: "subject with separator hashed", req: bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, claimsFor("auth0|123", time.Hour))),
			want: "sub:#" + keyfunc.HashAPIKey("auth0|123")},
		{name: "long subject hashed", req: bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, claimsFor(strings.Repeat("x", 257), time.Hour))),
			want: "sub:#" + keyfunc.HashAPIKey(strings.Repeat("x", 257))},
		{name: "issuer checked, matching", req: bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, jwt.RegisteredClaims{
			Subject: "alice", Issuer: "https://issuer.example", ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))})),
			opts: []jwt.ParserOption{jwt.WithIssuer("https://issuer.example")}, want: "sub:alice"},
		{name: "leeway admits recently expired", req: bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, claimsFor("alice", -time.Second))),
			opts: []jwt.ParserOption{jwt.WithLeeway(time.Minute)}, want: "sub:alice"},

		{name: "missing header", req: newRequest("", nil), wantErr: []error{keyfunc.ErrNoToken}},
		{name: "Basic scheme", req: newRequest("", map[string][]string{"Authorization": {"Basic YWxpY2U6c2VjcmV0"}}), wantErr: []error{keyfunc.ErrNoToken}},
		{name: "Bearer without token", req: newRequest("", map[string][]string{"Authorization": {"Bearer"}}), wantErr: []error{keyfunc.ErrNoToken}},
		{name: "Bearer with only spaces", req: newRequest("", map[string][]string{"Authorization": {"Bearer   "}}), wantErr: []error{keyfunc.ErrInvalidToken}},
		{name: "token as scheme", req: newRequest("", map[string][]string{"Authorization": {valid}}), wantErr: []error{keyfunc.ErrNoToken}},
		{name: "two Authorization headers", req: newRequest("", map[string][]string{"Authorization": {"Bearer " + valid, "Bearer " + valid}}),
			wantErr: []error{keyfunc.ErrInvalidToken}},
		{name: "too long", req: bearer(valid + strings.Repeat("A", maxTokenLen)), wantErr: []error{keyfunc.ErrInvalidToken}},
		{name: "forged signature", req: bearer(valid[:strings.LastIndexByte(valid, '.')+1] + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
			wantErr: []error{keyfunc.ErrInvalidToken, jwt.ErrTokenSignatureInvalid}},
		{name: "forged claims", req: bearer(forgeSubject(t, valid, "mallory")), wantErr: []error{keyfunc.ErrInvalidToken, jwt.ErrTokenSignatureInvalid}},
		{name: "wrong key", req: bearer(sign(t, jwt.SigningMethodHS256, otherKey, claimsFor("alice", time.Hour))),
			wantErr: []error{keyfunc.ErrInvalidToken, jwt.ErrTokenSignatureInvalid}},
		{name: "expired", req: bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, claimsFor("alice", -time.Minute))),
			wantErr: []error{keyfunc.ErrInvalidToken, jwt.ErrTokenExpired}},
		{name: "nbf in the future", req: bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, jwt.RegisteredClaims{
			Subject: "alice", ExpiresAt: jwt.NewNumericDate(now.Add(2 * time.Hour)), NotBefore: jwt.NewNumericDate(now.Add(time.Hour))})),
			wantErr: []error{keyfunc.ErrInvalidToken, jwt.ErrTokenNotValidYet}},
		{name: "no exp", req: bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, jwt.RegisteredClaims{Subject: "alice"})),
			wantErr: []error{keyfunc.ErrInvalidToken, jwt.ErrTokenRequiredClaimMissing}},
		{name: "alg none", req: bearer(sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claimsFor("alice", time.Hour))),
			wantErr: []error{keyfunc.ErrInvalidToken}},
		{name: "alg none with a keyFunc that would allow it", req: bearer(sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claimsFor("alice", time.Hour))),
			keyFunc: func(*jwt.Token) (any, error) { return jwt.UnsafeAllowNoneSignatureType, nil }, wantErr: []error{keyfunc.ErrInvalidToken}},
		{name: "HS256 when only RS256 allowed", req: bearer(valid), opts: []jwt.ParserOption{jwt.WithValidMethods([]string{"RS256"})},
			wantErr: []error{keyfunc.ErrInvalidToken, jwt.ErrTokenSignatureInvalid}},
		{name: "HS512 outside the default list", req: bearer(sign(t, jwt.SigningMethodHS512, hmacSecret, claimsFor("alice", time.Hour))),
			wantErr: []error{keyfunc.ErrInvalidToken}},
		{name: "HS256 signed with the ES256 public key bytes", req: bearer(sign(t, jwt.SigningMethodHS256, elliptic.MarshalCompressed(elliptic.P256(), ecKey.X, ecKey.Y), claimsFor("alice", time.Hour))),
			keyFunc: func(*jwt.Token) (any, error) { return &ecKey.PublicKey, nil }, wantErr: []error{keyfunc.ErrInvalidToken}},
		{name: "malformed one part", req: bearer("abc"), wantErr: []error{keyfunc.ErrInvalidToken, jwt.ErrTokenMalformed}},
		{name: "malformed three parts", req: bearer("a.b.c"), wantErr: []error{keyfunc.ErrInvalidToken, jwt.ErrTokenMalformed}},
		{name: "malformed empty parts", req: bearer(".."), wantErr: []error{keyfunc.ErrInvalidToken, jwt.ErrTokenMalformed}},
		{name: "missing sub", req: bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, claimsFor("", time.Hour))), wantErr: []error{keyfunc.ErrInvalidToken}},
		{name: "wrong issuer", req: bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, jwt.RegisteredClaims{
			Subject: "alice", Issuer: "https://evil.example", ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))})),
			opts: []jwt.ParserOption{jwt.WithIssuer("https://issuer.example")}, wantErr: []error{keyfunc.ErrInvalidToken, jwt.ErrTokenInvalidIssuer}},
		{name: "missing audience", req: bearer(valid), opts: []jwt.ParserOption{jwt.WithAudience("api")},
			wantErr: []error{keyfunc.ErrInvalidToken, jwt.ErrTokenRequiredClaimMissing}},
		{name: "wrong audience", req: bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, jwt.RegisteredClaims{
			Subject: "alice", Audience: jwt.ClaimStrings{"other"}, ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))})),
			opts: []jwt.ParserOption{jwt.WithAudience("api")}, wantErr: []error{keyfunc.ErrInvalidToken, jwt.ErrTokenInvalidAudience}},
		{name: "keyFunc error wrapped", req: bearer(valid), keyFunc: func(*jwt.Token) (any, error) { return nil, errUnknownKid },
			wantErr: []error{keyfunc.ErrInvalidToken, errUnknownKid}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kfn := tt.keyFunc
			if kfn == nil {
				kfn = hmacKey
			}
			kf, err := NewSubject(kfn, tt.opts...)
			if err != nil {
				t.Fatalf("NewSubject: %v", err)
			}
			got, err := kf(tt.req)
			if tt.want != "" {
				if err != nil || got != tt.want {
					t.Fatalf("Subject() = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil || got != "" {
				t.Fatalf("Subject() = %q, %v; want an error and no key", got, err)
			}
			for _, want := range tt.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("error %q does not wrap %q", err, want)
				}
			}
			assertNoToken(t, err, tt.req)
		})
	}
}

var errUnknownKid = errors.New("unknown kid")

// assertNoToken fails if the error text holds the bearer token or any of
// its three parts.
func assertNoToken(t *testing.T, err error, r *http.Request) {
	t.Helper()
	auth := r.Header.Get("Authorization")
	_, token, _ := strings.Cut(auth, " ")
	token = strings.TrimSpace(token)
	for _, part := range append(strings.Split(token, "."), token) {
		if len(part) >= 8 && strings.Contains(err.Error(), part) {
			t.Errorf("error text %q contains part of the token", err)
		}
	}
}

// forgeSubject swaps the claims of a signed token for others, keeping its
// header and signature.
func forgeSubject(t *testing.T, token, sub string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	forged := sign(t, jwt.SigningMethodHS256, otherKey, claimsFor(sub, time.Hour))
	return parts[0] + "." + strings.Split(forged, ".")[1] + "." + parts[2]
}

func TestJWTSubjectInvalidOptions(t *testing.T) {
	tests := []struct {
		name    string
		keyFunc jwt.Keyfunc
		opts    []jwt.ParserOption
	}{
		{"nil keyFunc", nil, nil},
		{"claims validation off", hmacKey, []jwt.ParserOption{jwt.WithoutClaimsValidation()}},
		{"empty allow-list", hmacKey, []jwt.ParserOption{jwt.WithValidMethods(nil)}},
		{"allow-list with none", hmacKey, []jwt.ParserOption{jwt.WithValidMethods([]string{"HS256", "none"})}},
		{"absurd leeway", hmacKey, []jwt.ParserOption{jwt.WithLeeway(100 * 365 * 24 * time.Hour)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewSubject(tt.keyFunc, tt.opts...); !errors.Is(err, algorithms.ErrInvalidOption) {
				t.Errorf("NewSubject error = %v, want algorithms.ErrInvalidOption", err)
			}
			valid := sign(t, jwt.SigningMethodHS256, hmacSecret, claimsFor("alice", time.Hour))
			if key, err := Subject(tt.keyFunc, tt.opts...)(bearer(valid)); !errors.Is(err, algorithms.ErrInvalidOption) || key != "" {
				t.Errorf("Subject() = %q, %v; want algorithms.ErrInvalidOption", key, err)
			}
		})
	}
}

func TestJWTSubjectNilOption(t *testing.T) {
	kf, err := NewSubject(hmacKey, nil, jwt.WithLeeway(time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := kf(bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, claimsFor("alice", time.Hour))))
	if err != nil || got != "sub:alice" {
		t.Errorf("Subject() = %q, %v; want sub:alice", got, err)
	}
}

// TestJWTSubjectTimeFunc checks that the caller's clock is honoured, so
// tests of code using Subject can pin time.
func TestJWTSubjectTimeFunc(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	token := sign(t, jwt.SigningMethodHS256, hmacSecret, jwt.RegisteredClaims{
		Subject: "alice", ExpiresAt: jwt.NewNumericDate(at.Add(time.Minute))})
	kf := Subject(hmacKey, jwt.WithTimeFunc(func() time.Time { return at }))
	if got, err := kf(bearer(token)); err != nil || got != "sub:alice" {
		t.Errorf("at %v: %q, %v; want sub:alice", at, got, err)
	}
	kf = Subject(hmacKey, jwt.WithTimeFunc(func() time.Time { return at.Add(time.Hour) }))
	if got, err := kf(bearer(token)); !errors.Is(err, jwt.ErrTokenExpired) {
		t.Errorf("an hour later: %q, %v; want expired", got, err)
	}
}
